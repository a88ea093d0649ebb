// --device cuda for concord-bench allreduce: device buffers, and the baselines on
// them: NCCL's allreduce, and MPI_Allreduce staged through pinned host memory
// (the MPI here is not CUDA-aware). Built with CUDA only (CONCORD_BENCH_CUDA).
#pragma once

#include "common/bench_options.hpp"

#include <concord/communicator.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace concord::bench {

// One allreduce call of an implementation on (send, recv, count).
using RunFn = std::function<void(const void* send, void* recv, std::size_t count)>;

class DeviceBench {
 public:
  // Picks GPU local_rank % device_count; throws std::invalid_argument without a GPU.
  explicit DeviceBench(const Communicator& comm);
  ~DeviceBench();

  // Device memory (freed with this object), zeroed.
  std::byte* allocate(std::size_t bytes);
  void upload(void* device, const void* host, std::size_t bytes);
  void download(void* host, const void* device, std::size_t bytes);

  // concord::allreduce on the bench's stream (blocking, as every impl here).
  RunFn concord_impl(const AllreduceOptions& o, Algorithm algorithm) const;
  // MPI_Allreduce with the device buffers copied to and from pinned host memory.
  RunFn mpi_staged_impl(const AllreduceOptions& o) const;
  // ncclAllReduce plus a stream synchronisation, or nullopt with `why` set when
  // NCCL cannot run here (not found; several ranks on one GPU before NCCL 2.30).
  std::optional<RunFn> nccl_impl(const AllreduceOptions& o, std::string* why);

  int device() const;
  CudaStream stream() const;     // the stream every impl here runs on
  std::string describe() const;  // "GPU 0 (NVIDIA H100 80GB HBM3), 2 ranks on it"

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace concord::bench
