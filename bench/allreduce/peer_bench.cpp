#include "allreduce/peer_bench.hpp"

#include "cuda/cuda_runtime.hpp"
#include "reduce/cuda_peer_kernels.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

namespace concord::bench {
namespace {

namespace cuda = concord::detail::cuda;

// One region of device memory per rank, each rank's mapped in every process (CUDA
// IPC), zero-filled. Collective: every rank constructs and destroys it together.
class PeerRegion {
 public:
  PeerRegion(const Communicator& comm, std::size_t bytes) : comm_(comm.mpi_comm()), own_(bytes) {
    cuda::check(cudaMemset(own_.get(), 0, bytes), "cudaMemset");
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    cudaIpcMemHandle_t handle{};
    cuda::check(cudaIpcGetMemHandle(&handle, own_.get()), "cudaIpcGetMemHandle");
    std::vector<cudaIpcMemHandle_t> all(comm.size());
    MPI_Allgather(&handle, sizeof handle, MPI_BYTE, all.data(), sizeof handle, MPI_BYTE, comm_);
    for (int r = 0; r < comm.size(); ++r) {
      void* p = own_.get();
      if (r != comm.rank()) {
        cuda::check(cudaIpcOpenMemHandle(&p, all[r], cudaIpcMemLazyEnablePeerAccess),
                    "cudaIpcOpenMemHandle");
        opened_.push_back(p);
      }
      mapped_.push_back(p);
    }
  }
  ~PeerRegion() {
    MPI_Barrier(comm_);  // no peer reads this rank's region any more
    for (void* p : opened_) cudaIpcCloseMemHandle(p);
    MPI_Barrier(comm_);  // and none has it mapped when it is freed
  }
  PeerRegion(const PeerRegion&) = delete;
  PeerRegion& operator=(const PeerRegion&) = delete;
  std::byte* own() const { return own_.get(); }
  void* of(int rank) const { return mapped_[rank]; }

 private:
  MPI_Comm comm_;
  cuda::DeviceBuffer own_;
  std::vector<void*> mapped_;
  std::vector<void*> opened_;
};

struct PeerState {
  PeerState(const Communicator& comm, std::size_t bytes)
      : inputs(comm, bytes),
        outputs(comm, bytes),
        flags(comm, sizeof(cuda::PeerFlags)),
        timeout(sizeof(cuda::PeerTimeout)) {
    *reinterpret_cast<cuda::PeerTimeout*>(timeout.get()) = {};
  }
  PeerRegion inputs;
  PeerRegion outputs;
  PeerRegion flags;
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
    cuda::check(cudaMemcpyAsync(state->inputs.own(), send, bytes, cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync");
    cuda::PeerAllreduce c;
    c.rank = rank;
    c.ranks = ranks;
    c.sequence = ++state->sequence;
    for (int r = 0; r < ranks; ++r) {
      c.flags[r] = static_cast<cuda::PeerFlags*>(state->flags.of(r));
      c.inputs[r] = state->inputs.of(r);
      c.outputs[r] = state->outputs.of(r);
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
    cuda::check(
        cudaMemcpyAsync(recv, state->outputs.own(), bytes, cudaMemcpyDeviceToDevice, stream),
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
