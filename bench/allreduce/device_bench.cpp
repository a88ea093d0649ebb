#include "allreduce/device_bench.hpp"

#include "common/elements.hpp"
#include "cuda/cuda_runtime.hpp"
#include "device/device_resources.hpp"
#include "dispatch/device_peer_path.hpp"
#include "dispatch/dispatch.hpp"
#include "transport/nccl_library.hpp"
#include "transport/nccl_transport.hpp"

#include <concord/allreduce.hpp>
#include <concord/error.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

namespace concord::bench {

namespace cuda = concord::detail::cuda;

struct DeviceBench::State {
  const Communicator* comm = nullptr;
  int device = 0;
  int ranks_on_device = 1;  // ranks of this node on this rank's GPU (max over the node)
  std::string name;
  std::unique_ptr<cuda::Stream> stream;
  std::vector<cuda::DeviceBuffer> buffers;
  std::unique_ptr<cuda::PinnedBuffer> staging_send;
  std::unique_ptr<cuda::PinnedBuffer> staging_recv;
  std::unique_ptr<detail::NcclComm> nccl;
  const detail::NcclLibrary* nccl_library = nullptr;  // where nccl_impl loaded it
  // The communicators of the impls that fix a device path (concord_impl).
  std::deque<Communicator> path_comms;
};

namespace {

ncclDataType_t nccl_type(DataType dtype) {
  switch (dtype) {
    case DataType::Int8:
      return ncclInt8;
    case DataType::UInt8:
      return ncclUint8;
    case DataType::Int32:
      return ncclInt32;
    case DataType::Int64:
      return ncclInt64;
    case DataType::Float16:
      return ncclFloat16;
    case DataType::BFloat16:
      return ncclBfloat16;
    case DataType::Float32:
      return ncclFloat32;
    case DataType::Float64:
      return ncclFloat64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Prod:
      return ncclProd;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Avg:
      return ncclAvg;
  }
  return ncclSum;
}

}  // namespace

DeviceBench::DeviceBench(const Communicator& comm) : state_(std::make_unique<State>()) {
  std::string why;
  const int devices = cuda::device_count(&why);
  int have = devices > 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, comm.mpi_comm());
  if (have == 0) {
    throw std::invalid_argument(fmt::format("--device cuda: no CUDA device on {} ({})",
                                            devices > 0 ? "some rank" : "this rank",
                                            why.empty() ? "see other ranks" : why));
  }
  state_->comm = &comm;
  state_->device = comm.local_rank() % devices;
  cuda::check(cudaSetDevice(state_->device), "cudaSetDevice");
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, state_->device), "cudaGetDeviceProperties");
  state_->name = prop.name;
  // Ranks of this node per GPU: ceil(local ranks / devices) at most.
  int per_device = (comm.local_size() + devices - 1) / devices;
  MPI_Allreduce(MPI_IN_PLACE, &per_device, 1, MPI_INT, MPI_MAX, comm.mpi_comm());
  state_->ranks_on_device = per_device;
  state_->stream = std::make_unique<cuda::Stream>();
  state_->staging_send = std::make_unique<cuda::PinnedBuffer>();
  state_->staging_recv = std::make_unique<cuda::PinnedBuffer>();
}

DeviceBench::~DeviceBench() = default;

int DeviceBench::device() const {
  return state_->device;
}

CudaStream DeviceBench::stream() const {
  return state_->stream->get();
}

std::string DeviceBench::describe() const {
  return fmt::format("GPU {} ({}), {} rank(s) per GPU", state_->device, state_->name,
                     state_->ranks_on_device);
}

std::byte* DeviceBench::allocate(std::size_t bytes) {
  state_->buffers.emplace_back(std::max<std::size_t>(bytes, 1));
  cuda::check(cudaMemset(state_->buffers.back().get(), 0, bytes), "cudaMemset");
  // cudaMemset and pageable uploads queue on the legacy stream, which the
  // benchmark's non-blocking stream does not wait for.
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return state_->buffers.back().get();
}

void DeviceBench::upload(void* device, const void* host, std::size_t bytes) {
  cuda::check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void DeviceBench::download(void* host, const void* device, std::size_t bytes) {
  cuda::check(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

RunFn DeviceBench::concord_impl(const AllreduceOptions& o, Algorithm algorithm,
                                detail::DevicePathPreference path) {
  concord::AllreduceOptions options;
  options.algorithm = algorithm;
  options.device = Device::Cuda;
  options.stream = state_->stream->get();
  const Communicator* comm = state_->comm;
  if (path != detail::DevicePathPreference::Auto) {
    // Every rank makes its impls in the same order, so these set-ups meet.
    comm = &state_->path_comms.emplace_back(state_->comm->mpi_comm());
    detail::device_resources(comm->state()).preference = path;
  }
  return [comm, o, options](const void* s, void* r, std::size_t n) {
    allreduce(s, r, n, o.dtype, o.op, *comm, options);
  };
}

bool DeviceBench::device_synchronised_runs(std::string* why) {
  const Communicator& comm = state_->path_comms.back();
  auto& res = detail::device_resources(comm.state());
  const auto preference = std::exchange(res.preference, detail::DevicePathPreference::Auto);
  cuda::DeviceBuffer one(sizeof(float));
  concord::AllreduceOptions options;
  options.device = Device::Cuda;
  options.stream = state_->stream->get();
  allreduce(one.get(), one.get(), 1, DataType::Float32, ReduceOp::Sum, comm, options);
  cuda::check(cudaStreamSynchronize(options.stream), "cudaStreamSynchronize");
  res.preference = preference;
  if (res.peer && res.peer->concurrent) return true;
  *why = res.peer ? "the ranks' kernels do not run at the same time here (ranks sharing a GPU "
                    "without MPS; CONCORD_CUDA_PEER=on takes the path without the probe)"
                  : "it cannot run on these ranks (not one node of 2-8 ranks, CUDA IPC off or "
                    "failed, or CONCORD_CUDA_PEER=off)";
  return false;
}

SyncFn DeviceBench::concord_sync(detail::DevicePathPreference path) const {
  const Communicator* comm = state_->comm;
  if (path != detail::DevicePathPreference::Auto) comm = &state_->path_comms.back();
  cudaStream_t stream = state_->stream->get();
  return [comm, stream] {
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    detail::check_device_failure(*comm);  // a call of the last timed ones that gave up
  };
}

SyncFn DeviceBench::synchronize() const {
  cudaStream_t stream = state_->stream->get();
  return [stream] { cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); };
}

nlohmann::json DeviceBench::context() const {
  nlohmann::json c = {{"gpu", state_->name}, {"ranks_per_gpu", state_->ranks_on_device}};
  if (const detail::NcclLibrary* lib = state_->nccl_library) {
    c["nccl_version"] = detail::nccl_version_string(lib->version);
    nlohmann::json settings = nlohmann::json::object();
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const std::size_t eq = entry.find('=');
      if (entry.starts_with("NCCL_") && eq != std::string::npos) {
        settings[entry.substr(0, eq)] = entry.substr(eq + 1);
      }
    }
    c["nccl_env"] = settings;
  }
  // What concord's own set-up found, on the first of its communicators that set the
  // device-synchronised path up (every one of them finds the same).
  std::vector<const Communicator*> comms{state_->comm};
  for (const Communicator& comm : state_->path_comms) comms.push_back(&comm);
  for (const Communicator* comm : comms) {
    const auto& res = comm->state().device_resources;
    if (!res || !res->peer) continue;
    c["ranks_concurrent"] = res->peer->concurrent;
    if (res->peer->probe_meeting_ns > 0) c["probe_meeting_us"] = res->peer->probe_meeting_ns / 1e3;
    break;
  }
  return c;
}

RunFn DeviceBench::mpi_staged_impl(const AllreduceOptions& o) const {
  auto type = mpi_type(o.dtype);
  if (!type) {
    throw std::invalid_argument(
        fmt::format("--impl mpi: this MPI has no datatype for {}", to_string(o.dtype)));
  }
  if (o.op == ReduceOp::Avg) {
    throw std::invalid_argument("--impl mpi with --device cuda: MPI has no average; use -o sum");
  }
  const std::size_t bytes = o.max_bytes;
  state_->staging_send->reserve(bytes);
  state_->staging_recv->reserve(bytes);
  std::byte* hs = state_->staging_send->get();
  std::byte* hr = state_->staging_recv->get();
  cudaStream_t stream = state_->stream->get();
  MPI_Comm world = state_->comm->mpi_comm();
  const std::size_t esize = size_of(o.dtype);
  const MPI_Op op = mpi_op(o.op);
  return [=](const void* s, void* r, std::size_t n) {
    cuda::check(cudaMemcpyAsync(hs, s, n * esize, cudaMemcpyDeviceToHost, stream),
                "cudaMemcpyAsync");
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    MPI_Allreduce(hs, hr, static_cast<int>(n), *type, op, world);
    cuda::check(cudaMemcpyAsync(r, hr, n * esize, cudaMemcpyHostToDevice, stream),
                "cudaMemcpyAsync");
    cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  };
}

std::optional<RunFn> DeviceBench::nccl_impl(const AllreduceOptions& o, std::string* why) {
  std::string reason;
  const detail::NcclLibrary* lib = detail::try_nccl(&reason);
  int ok = lib != nullptr ? 1 : 0;
  if (ok != 0 && state_->ranks_on_device > 1) {
    if (!detail::nccl_supports_multi_rank_gpu(lib->version)) {
      reason = fmt::format(
          "NCCL {} refuses several ranks on one GPU ({} ranks share a GPU here); that needs NCCL "
          "2.30 or later with NCCL_MULTI_RANK_GPU_ENABLE=1",
          detail::nccl_version_string(lib->version), state_->ranks_on_device);
      ok = 0;
    } else {
      setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);  // unless the user chose otherwise
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, state_->comm->mpi_comm());
  if (ok == 0) {
    if (why != nullptr) *why = reason.empty() ? "NCCL is unavailable on another rank" : reason;
    return std::nullopt;
  }
  state_->nccl = std::make_unique<detail::NcclComm>(state_->comm->mpi_comm(), state_->comm->rank());
  state_->nccl_library = lib;
  if (state_->comm->rank() == 0) {
    std::string settings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).starts_with("NCCL_"))
        settings += std::string(settings.empty() ? "" : " ") + *e;
    }
    fmt::print("# NCCL {}, its defaults{}{}\n", detail::nccl_version_string(lib->version),
               settings.empty() ? "" : " but ", settings);
  }
  ncclComm_t comm = state_->nccl->get();
  cudaStream_t stream = state_->stream->get();
  const ncclDataType_t type = nccl_type(o.dtype);
  const ncclRedOp_t op = nccl_op(o.op);
  const int rank = state_->comm->rank();
  return [lib, comm, stream, type, op, rank](const void* s, void* r, std::size_t n) {
    detail::check_nccl(lib->all_reduce(s, r, n, type, op, comm, stream), "ncclAllReduce", rank);
  };
}

}  // namespace concord::bench
