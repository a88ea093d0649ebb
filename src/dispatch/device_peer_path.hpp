// A communicator's device-synchronised path (collectives/device_peer.hpp): the IPC
// memory its kernels meet in, the record they report a timeout in, and whether the
// node's ranks' kernels run at the same time, which the path needs. Set up by the
// first device call that could take the path. CUDA builds only.
#pragma once

#include "collectives/device_peer.hpp"
#include "core/communicator_state.hpp"
#include "cuda/cuda_runtime.hpp"
#include "device/device_resources.hpp"
#include "dispatch/device_peer_buffers.hpp"
#include "transport/cuda_ipc_arena.hpp"

#include <cstdint>
#include <memory>

namespace concord::detail {

// What the path's kernels write for the host to read, in pinned memory.
// And what the host writes for them: `aborted`, PeerSpace::aborted.
struct PeerRecords {
  cuda::PeerTimeout timeout;  // PeerSpace::record
  cuda::PeerProbeResult probe;
  std::uint32_t aborted;
};

struct DevicePeerPath {
  DevicePeerPath() = default;
  // Waits for the device first: queued kernels may still write the peers' flags and
  // read their regions through the mappings the arena closes.
  ~DevicePeerPath();
  DevicePeerPath(const DevicePeerPath&) = delete;
  DevicePeerPath& operator=(const DevicePeerPath&) = delete;

  // Queues the call on `stream` after every earlier call on the path, whatever its
  // stream: they share the flags and regions, so two must never run at once (a call
  // on another stream than the last one waits for the last one's work). A call
  // captured into a CUDA graph is ordered by its stream alone. From the tuning table's
  // cuda_peer_direct_bytes on, outside a capture (which every rank makes alike), it
  // runs on the callers' buffers where they can be mapped into the peers.
  void allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                 CudaStream stream);

  std::unique_ptr<CudaIpcArena> arena;  // null where the ranks' kernels do not run at once
  cuda::PinnedBuffer pinned;            // a PeerRecords
  PeerRecords* records = nullptr;
  PeerSpace space;
  // Whether the path runs: the probe found the ranks' kernels running at the same
  // time (MPS, or a GPU each), or CONCORD_CUDA_PEER=on said so. The same on every rank.
  bool concurrent = false;
  double probe_meeting_ns = 0;  // the probe's mean meeting, where it ran and none timed out

 private:
  PeerBufferMaps buffer_maps_;  // closed before the arena goes (members go in reverse)
  cuda::Event last_call_;       // recorded after each call queued outside a capture
  CudaStream last_stream_ = nullptr;
  bool called_ = false;
};

// Throws Error(InvalidArgument): the stream is being captured, and `why` the call
// cannot be.
[[noreturn]] void refuse_capture(const char* why, int rank);

// The path of `state`'s node, or null where it cannot run: CONCORD_CUDA_PEER=off,
// the ranks span nodes, a node of one rank or of more than cuda::kMaxPeerRanks, no
// IPC. Collective over the communicator the first time (every rank calls it in the
// same device allreduce; the outcome is the same on every rank). The probe runs on
// `stream`, which must not be capturing (set-up allocates and synchronises). Where the ranks'
// kernels do not run at once, the path is kept with `concurrent` false (and no memory), and the
// node's first rank says so once.
DevicePeerPath* device_peer_path(DeviceResources& res, const CommunicatorState& state,
                                 CudaStream stream);

// The most blocks one of the path's kernels may run on `state`'s node: the tuning
// table's cuda_peer_blocks, within the ranks' share of their GPU's resident blocks
// (block b of a rank waits for block b of each peer, so every block of every rank's
// kernel must be on the GPU at once). The same on every rank; collective over the node.
int peer_block_limit(const CommunicatorState& state);

}  // namespace concord::detail
