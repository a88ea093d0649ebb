// The callers' buffers of a direct call of the device-synchronised path
// (cuda::direct_allreduce), mapped into every rank of the node: each call, the ranks
// tell each other, through the path's boards, the CUDA IPC handles of the allocations
// that hold their send and receive buffers; each opens its peers' once and keeps them
// (an allocation freed and made again has another handle). CUDA builds only.
#pragma once

#include "collectives/device_peer.hpp"
#include "cuda/cuda_runtime.hpp"
#include "transport/shared_arena.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace concord::detail {

class PeerBufferMaps {
 public:
  // The most allocations of each peer kept mapped. A new one past them replaces the
  // one used longest ago, whose mapping is closed once the kernels queued before have
  // finished (an event recorded then): no kernel of this rank may still use it.
  static constexpr std::size_t kMostPerPeer = 64;

  PeerBufferMaps() = default;
  ~PeerBufferMaps();  // closes the mappings (the path has waited for the device)
  PeerBufferMaps(const PeerBufferMaps&) = delete;
  PeerBufferMaps& operator=(const PeerBufferMaps&) = delete;

  // Every rank's `send` and `recv` (device memory of `bytes`) as this process maps
  // them, or nullopt on every rank alike where some rank's cannot be: memory CUDA IPC
  // cannot export (not from cudaMalloc), or a rank that cannot map a peer's.
  // Collective over the space's ranks: two meetings on the host, each bounded as the
  // kernels' waits are (exchange_on_boards: Error(Timeout) naming who did not come).
  // `stream` is where the call's kernels go, after every earlier call's.
  std::optional<PeerBuffers> map(const PeerSpace& space, const void* send, void* recv,
                                 std::size_t bytes, CudaStream stream);

 private:
  struct Opened {
    cudaIpcMemHandle_t handle;
    std::byte* base;
    std::uint64_t used;  // the exchange it was last used in
  };
  struct Closing {
    std::byte* base;
    std::unique_ptr<cuda::Event> after;  // the kernels that may use it
  };
  std::byte* open(int peer, const cudaIpcMemHandle_t& handle, CudaStream stream);
  void close_finished();

  std::uint64_t exchanges_ = 0;  // the boards' exchanges so far, the same on every rank
  std::vector<Opened> opened_[cuda::kMaxPeerRanks];
  std::vector<Closing> closing_;
};

}  // namespace concord::detail
