#include "allreduce/peer_bench.hpp"

#include "cuda/cuda_runtime.hpp"
#include "dispatch/device_peer_path.hpp"
#include "reduce/cuda_peer_kernels.hpp"
#include "transport/cuda_ipc_arena.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

namespace concord::bench {
namespace {

namespace cuda = concord::detail::cuda;

// This rank's flags, input and output, and its peers', in one CUDA IPC arena (as the
// device path has them): the flags in its header, inputs and outputs in regions 0 and 1.
struct PeerState {
  PeerState(const Communicator& comm, std::size_t bytes) : timeout(sizeof(cuda::PeerTimeout)) {
    constexpr std::size_t kAlign = 256;
    const std::size_t region = (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    std::string why;
    arena = detail::CudaIpcArena::create(
        comm.mpi_comm(),
        {.region_bytes = region, .regions = 2, .header_bytes = sizeof(cuda::PeerFlags)},
        comm.rank(), &why);
    if (!arena) throw std::invalid_argument("--impl device-one-shot/two-shot: " + why);
    record = new (timeout.get()) cuda::PeerTimeout{};
  }

  std::unique_ptr<detail::CudaIpcArena> arena;
  // Mapped pinned memory (every cudaMallocHost allocation is, under unified
  // addressing): the kernel records a timeout there and the host reads it directly.
  cuda::PinnedBuffer timeout;
  cuda::PeerTimeout* record = nullptr;
  std::uint32_t calls = 0;
};

}  // namespace

std::pair<RunFn, SyncFn> peer_kernel_impl(DeviceBench& device, const Communicator& comm,
                                          const AllreduceOptions& o, bool two_shot) {
  const char* name = two_shot ? "device-two-shot" : "device-one-shot";
  if (comm.local_size() != comm.size()) {
    throw std::invalid_argument(fmt::format("--impl {}: the ranks of one node only", name));
  }
  if (comm.size() > cuda::kMaxPeerRanks) {
    throw std::invalid_argument(
        fmt::format("--impl {}: at most {} ranks", name, cuda::kMaxPeerRanks));
  }
  if (o.op == ReduceOp::Avg) {
    throw std::invalid_argument(fmt::format(
        "--impl {}: sum, prod, min or max (the kernel leaves avg's scaling to its caller)", name));
  }
  auto state = std::make_shared<PeerState>(comm, o.max_bytes);
  cuda::PeerAllreduce c;
  c.rank = comm.rank();
  c.ranks = comm.size();
  for (int r = 0; r < c.ranks; ++r) {
    c.flags[r] = reinterpret_cast<cuda::PeerFlags*>(state->arena->header(r));
    c.inputs[r] = state->arena->region(r, 0);
    c.outputs[r] = state->arena->region(r, 1);
  }
  c.dtype = o.dtype;
  c.op = o.op;
  c.max_blocks = detail::peer_block_limit(comm.state());  // as concord's path has them
  c.timeout_ns = 10'000'000'000;                          // 10 s
  c.timeout = state->record;
  const CudaStream stream = device.stream();
  RunFn run = [state, c, stream, two_shot](const void* send, void* recv,
                                           std::size_t count) mutable {
    c.source = send;
    c.result = recv;
    c.count = count;
    c.call = ++state->calls;
    (two_shot ? cuda::two_shot_allreduce : cuda::one_shot_allreduce)(c, stream);
  };
  SyncFn sync = [state, stream, name] {
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const volatile cuda::PeerTimeout* t = state->record;
    if (t->call != 0) {
      throw Error(ErrorCode::Timeout, -1,
                  fmt::format("{}: call {} timed out waiting for ranks (mask {:#x})", name, t->call,
                              t->missing_ranks));
    }
  };
  return {std::move(run), std::move(sync)};
}

}  // namespace concord::bench
