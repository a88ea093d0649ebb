// --device cuda for concord-bench allreduce: device buffers, and the baselines on
// them: NCCL's allreduce, and MPI_Allreduce staged through pinned host memory
// (the MPI here is not CUDA-aware). Built with CUDA only (CONCORD_BENCH_CUDA).
#pragma once

#include "common/bench_options.hpp"
#include "device/device_resources.hpp"

#include <concord/communicator.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace concord::bench {

// One allreduce call of an implementation on (send, recv, count): it may only queue
// its work, as NCCL and concord's device path do.
using RunFn = std::function<void(const void* send, void* recv, std::size_t count)>;
// Returns once every call queued before has finished (nccl-tests' timing: N calls,
// one synchronisation).
using SyncFn = std::function<void()>;

class DeviceBench {
 public:
  // Picks GPU local_rank % device_count; throws std::invalid_argument without a GPU.
  explicit DeviceBench(const Communicator& comm);
  ~DeviceBench();

  // Device memory (freed with this object), zeroed.
  std::byte* allocate(std::size_t bytes);
  void upload(void* device, const void* host, std::size_t bytes);
  void download(void* host, const void* device, std::size_t bytes);

  // concord::allreduce on the bench's stream. `path` other than Auto: on a
  // communicator of its own whose device calls all take that path (concord-rounds,
  // concord-staged, concord-peer), for comparing the paths in one run; collective.
  RunFn concord_impl(const AllreduceOptions& o, Algorithm algorithm,
                     detail::DevicePathPreference path = detail::DevicePathPreference::Auto);
  // Whether the device-synchronised path runs on the communicator concord_impl made
  // last (after one call there, which sets it up: collective); where not, `why`.
  bool device_synchronised_runs(std::string* why);
  // MPI_Allreduce with the device buffers copied to and from pinned host memory
  // (synchronous: it waits for each copy).
  RunFn mpi_staged_impl(const AllreduceOptions& o) const;
  // ncclAllReduce queued on the stream, or nullopt with `why` set when NCCL cannot
  // run here (not found; several ranks on one GPU before NCCL 2.30). Ranks sharing a
  // GPU get NCCL_MULTI_RANK_GPU_ENABLE=1 unless the environment says otherwise; NCCL
  // runs with its defaults otherwise (context() reports every NCCL_* variable set).
  std::optional<RunFn> nccl_impl(const AllreduceOptions& o, std::string* why);
  // Synchronises the bench's stream.
  SyncFn synchronize() const;
  // The same for the concord impl made last with `path`, then raises what its calls
  // recorded on the device (a peer that never arrived).
  SyncFn concord_sync(detail::DevicePathPreference path) const;

  int device() const;
  CudaStream stream() const;     // the stream every impl here runs on
  std::string describe() const;  // "GPU 0 (NVIDIA H100 80GB HBM3), 2 rank(s) per GPU"
  // What the run's records say of the device: GPU model and ranks per GPU, the NCCL
  // version and NCCL_* settings (where NCCL was loaded), and whether concord's
  // device-synchronised path found the ranks' kernels running at once.
  nlohmann::json context() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace concord::bench
