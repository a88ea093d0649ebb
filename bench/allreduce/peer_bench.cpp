#include "allreduce/peer_bench.hpp"

#include "cuda/cuda_runtime.hpp"
#include "reduce/cuda_peer_kernels.hpp"
#include "transport/cuda_ipc_arena.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace concord::bench {
namespace {

namespace cuda = concord::detail::cuda;

// This rank's input, output and flags, and its peers', in one CUDA IPC arena (the
// one the device path uses): regions 0, 1 and 2 of each rank, the flags zero-filled.
struct PeerState {
  PeerState(const Communicator& comm, std::size_t bytes) : timeout(sizeof(cuda::PeerTimeout)) {
    constexpr std::size_t kAlign = 256;
    const std::size_t region =
        (std::max(bytes, sizeof(cuda::PeerFlags)) + kAlign - 1) / kAlign * kAlign;
    std::string why;
    arena = detail::CudaIpcArena::create(comm.mpi_comm(), region, comm.rank(), &why);
    if (!arena) throw std::invalid_argument("--impl device-one-shot/two-shot: " + why);
    cuda::check(cudaMemset(flags(comm.rank()), 0, sizeof(cuda::PeerFlags)), "cudaMemset");
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    *reinterpret_cast<cuda::PeerTimeout*>(timeout.get()) = {};
  }
  std::byte* input(int rank) const { return arena->region(rank, 0); }
  std::byte* output(int rank) const { return arena->region(rank, 1); }
  std::byte* flags(int rank) const { return arena->region(rank, 2); }

  std::unique_ptr<detail::CudaIpcArena> arena;
  // Mapped pinned memory (every cudaMallocHost allocation is, under unified
  // addressing): the kernel records a timeout there and the host reads it directly.
  cuda::PinnedBuffer timeout;
  std::uint32_t sequence = 0;
};

}  // namespace

RunFn peer_kernel_impl(DeviceBench& device, const Communicator& comm, const AllreduceOptions& o,
                       bool two_shot) {
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
  const CudaStream stream = device.stream();
  const int rank = comm.rank();
  const int ranks = comm.size();
  const DataType dtype = o.dtype;
  const ReduceOp op = o.op;
  return [state, stream, rank, ranks, dtype, op, two_shot, name](const void* send, void* recv,
                                                                 std::size_t count) {
    const std::size_t bytes = count * size_of(dtype);
    cuda::check(cudaMemcpyAsync(state->input(rank), send, bytes, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync");
    cuda::PeerAllreduce c;
    c.rank = rank;
    c.ranks = ranks;
    c.sequence = ++state->sequence;
    for (int r = 0; r < ranks; ++r) {
      c.flags[r] = reinterpret_cast<cuda::PeerFlags*>(state->flags(r));
      c.inputs[r] = state->input(r);
      c.outputs[r] = state->output(r);
    }
    c.count = count;
    c.dtype = dtype;
    c.op = op;
    c.timeout_ns = 10'000'000'000;  // 10 s
    c.timeout = reinterpret_cast<cuda::PeerTimeout*>(state->timeout.get());
    if (two_shot) {
      cuda::two_shot_allreduce(c, stream);
    } else {
      cuda::one_shot_allreduce(c, stream);
    }
    cuda::check(cudaMemcpyAsync(recv, state->output(rank), bytes, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync");
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const volatile cuda::PeerTimeout* t = c.timeout;
    if (t->sequence != 0) {
      throw Error(ErrorCode::Timeout, -1,
                  fmt::format("{}: call {} timed out waiting for ranks (mask {:#x})", name,
                              t->sequence, t->missing_ranks));
    }
  };
}

}  // namespace concord::bench
