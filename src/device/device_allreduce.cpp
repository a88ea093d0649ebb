// The blocking allreduce on device buffers. Three ways, chosen once per
// communicator and the same on every rank:
//   - ranks of a node share CUDA IPC regions (also several ranks on one GPU): the
//     shared-memory algorithms run with the CUDA executor (copies and reduction
//     kernels on the caller's stream), and across nodes each shard goes over NCCL
//     (or, without NCCL, through pinned host memory over MPI);
//   - one rank per node: the same, without the node step;
//   - otherwise (IPC off or failed): pinned-host staging in chunks around the
//     host allreduce.
#include "device/device_path.hpp"

#include "collectives/algorithms.hpp"
#include "collectives/host_executor.hpp"
#include "collectives/message_view.hpp"
#include "collectives/tuning_table.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "device/cuda_executor.hpp"
#include "device/device_resources.hpp"
#include "device/pointer_query.hpp"
#include "transport/mpi_transport.hpp"
#if CONCORD_WITH_NCCL
#include "transport/nccl_transport.hpp"
#endif

#include <concord/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace concord::detail {
namespace {

// Device shards up to this size cross nodes by recursive doubling over NCCL,
// larger ones by reduce-scatter + allgather (NCCL runs only paired exchanges).
constexpr std::size_t kNcclRecursiveDoublingBytes = 64 * 1024;

#if CONCORD_WITH_NCCL
// Whether two ranks of `comm` use the same physical GPU (virtual nodes on one
// machine, or more ranks than GPUs): compared by device UUID.
bool ranks_share_a_gpu(MPI_Comm comm, int device, int rank) {
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", rank);
  int size = 1;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size", rank);
  std::vector<cudaUUID_t> all(static_cast<std::size_t>(size));
  check_mpi(MPI_Allgather(&prop.uuid, sizeof(cudaUUID_t), MPI_BYTE, all.data(), sizeof(cudaUUID_t),
                          MPI_BYTE, comm),
            "MPI_Allgather", rank);
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      if (std::memcmp(&all[i], &all[j], sizeof(cudaUUID_t)) == 0) return true;
    }
  }
  return false;
}
#endif

bool nccl_usable(DeviceResources& res, const Topology& topo, int rank) {
#if CONCORD_WITH_NCCL
  if (!res.nccl_tried) {
    // Collective over the cross communicator: its ranks share a local rank, so
    // they reach here together.
    res.nccl_tried = true;
    std::string why;
    const NcclLibrary* lib = config().nccl ? try_nccl(&why) : nullptr;
    int ok = lib != nullptr ? 1 : 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, topo.cross.get()),
              "MPI_Allreduce", rank);
    if (ok != 0 && ranks_share_a_gpu(topo.cross.get(), res.device, rank)) {
      // NCCL before 2.30 refuses two ranks on one GPU in a communicator.
      if (nccl_supports_multi_rank_gpu(lib->version)) {
        setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);  // unless the user chose otherwise
      } else {
        ok = 0;
        why = fmt::format("NCCL {} runs no two ranks on one GPU (2.30 does)",
                          nccl_version_string(lib->version));
      }
    }
    if (ok != 0) {
      // A failed set-up on one rank must not leave its node peers waiting in the
      // next node step: every rank of the cross communicator agrees to fall back.
      try {
        res.nccl_cross = std::make_shared<NcclComm>(topo.cross.get(), rank);
      } catch (const Error& e) {
        why = e.what();
      }
      int made = res.nccl_cross ? 1 : 0;
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, &made, 1, MPI_INT, MPI_MIN, topo.cross.get()),
                "MPI_Allreduce", rank);
      if (made == 0) {
        res.nccl_cross.reset();
        if (why.empty()) why = "NCCL set-up failed on another node";
      }
    }
    if (!res.nccl_cross && config().nccl && !why.empty()) {
      fmt::print(stderr,
                 "concord: rank {}: NCCL unavailable ({}); device buffers cross nodes "
                 "through host memory\n",
                 rank, why);
    }
  }
  return res.nccl_cross != nullptr;
#else
  (void)res, (void)topo, (void)rank;
  return false;
#endif
}

// One shard among the ranks with this rank's local rank, in place on the device.
void cross_node_allreduce(DeviceResources& res, const CommunicatorState& state, void* shard,
                          std::size_t count, DataType dtype, ReduceOp op, CudaExecutor& exec) {
  const Topology& topo = state.topology;
  const std::size_t esize = size_of(dtype);
  const std::size_t bytes = count * esize;
  const ReduceSpec spec{esize, dtype, &exec};
#if CONCORD_WITH_NCCL
  if (nccl_usable(res, topo, state.rank)) {
    NcclTransport transport(*res.nccl_cross, exec.stream());
    const Algorithm algorithm = bytes <= kNcclRecursiveDoublingBytes
                                    ? Algorithm::RecursiveDoubling
                                    : Algorithm::ReduceScatterAllgather;
    allreduce_flat(algorithm, transport, shard, count, spec, 0);
    return;
  }
#else
  (void)nccl_usable;
#endif
  // Host staging: the shard to pinned memory, a flat allreduce over MPI, back.
  res.staging.reserve(bytes);
  std::byte* host = res.staging.get();
  exec.copy(host, shard, bytes);
  exec.fence();
  HostExecutor host_exec(dtype, op);
  const ReduceSpec host_spec{esize, dtype, &host_exec};
  MpiTransport cross(topo.cross.get());
  allreduce_flat(choose_flat_algorithm(bytes, cross.size()), cross, host, count, host_spec,
                 config().ring_segment_bytes);
  exec.copy(shard, host, bytes);
}

// Pinned-host staging around the host allreduce, chunk by chunk.
void allreduce_staged(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                      const Communicator& comm, const AllreduceOptions& options,
                      DeviceResources& res, CudaExecutor& exec) {
  const std::size_t esize = size_of(dtype);
  const std::size_t chunk = std::max<std::size_t>(1, config().cuda_staging_bytes / esize);
  res.staging.reserve(std::min(count, chunk) * esize);
  std::byte* host = res.staging.get();
  AllreduceOptions host_options;
  host_options.algorithm = options.algorithm;
  host_options.ring_segment_bytes = options.ring_segment_bytes;
  host_options.device = Device::Cpu;
  for (std::size_t offset = 0; offset < count; offset += chunk) {
    const std::size_t n = std::min(chunk, count - offset);
    exec.copy(host, static_cast<const std::byte*>(send) + offset * esize, n * esize);
    exec.fence();
    allreduce(host, host, n, dtype, op, comm, host_options);
    exec.copy(static_cast<std::byte*>(recv) + offset * esize, host, n * esize);
    exec.fence();  // the staging buffer is free again
  }
}

}  // namespace

DeviceResources& device_resources(const CommunicatorState& state) {
  const int current = cuda::current_device();
  if (state.device_resources) {
    auto& res = *static_cast<DeviceResources*>(state.device_resources.get());
    if (res.device != current) {
      throw Error(ErrorCode::InvalidArgument, state.rank,
                  fmt::format("allreduce: this communicator's device collectives run on GPU {}, "
                              "but GPU {} is current; use one communicator per GPU",
                              res.device, current));
    }
    return res;
  }
  const Config& cfg = config();
  const Topology& topo = state.topology;
  auto res = std::make_shared<DeviceResources>();
  res->device = current;
  std::string why;
  if (cfg.cuda_ipc && topo.local_size > 1) {
    try {
      res->arena =
          CudaIpcArena::create(topo.local.get(), cfg.cuda_ipc_region_bytes, state.rank, &why);
    } catch (const Error& e) {
      why = e.what();
    }
  }
  int ok = why.empty() ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, state.comm.get()),
            "MPI_Allreduce", state.rank);
  if (ok == 0) {
    if (!why.empty()) {
      fmt::print(stderr, "{}; device buffers go through pinned host memory instead\n", why);
    } else if (state.rank == 0) {
      fmt::print(stderr,
                 "concord: rank 0: CUDA IPC failed on another node; device buffers go "
                 "through pinned host memory instead\n");
    }
    res->arena.reset();
  }
  res->ipc_everywhere = ok != 0 && cfg.cuda_ipc;
  state.device_resources = res;
  return *res;
}

namespace {

// The cache's answer for `ptr`; for device memory, also a check that it is on the
// current GPU: kernels run on the current device, and another GPU's memory is
// reachable only through peer access, so such buffers would fault there.
PointerInfo lookup_on_current_gpu(const void* ptr, int rank) {
  PointerInfo info = pointer_cache().lookup(ptr);
  if (info.device != Device::Cuda) return info;
  const int current = cuda::current_device();
  if (info.ordinal != current) {
    // The cache cannot see frees: the range may have been freed on one GPU and
    // handed out again on another. Ask the driver before refusing.
    pointer_cache().forget(ptr);
    info = pointer_cache().lookup(ptr);
  }
  if (info.device == Device::Cuda && info.ordinal != current) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("allreduce: the buffers are on GPU {}, but GPU {} is current on "
                            "this thread (cudaSetDevice({}) first)",
                            info.ordinal, current, info.ordinal));
  }
  return info;
}

}  // namespace

Device classify_pointer(const void* ptr, int rank) {
  if (!cuda_available()) return Device::Cpu;
  return lookup_on_current_gpu(ptr, rank).device;
}

void allreduce_device(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                      const Communicator& comm, const AllreduceOptions& options) {
  const CommunicatorState& state = comm.state();
  if (!cuda_available()) {
    std::string why;
    cuda::device_count(&why);
    throw Error(ErrorCode::InvalidArgument, state.rank,
                fmt::format("allreduce: Device::Cuda buffers, but this process sees no CUDA "
                            "device ({})",
                            why));
  }
  // Without options.device, classify_pointer has checked the buffers' GPU already.
  if (options.device) {
    for (const void* p : {send, static_cast<const void*>(recv)})
      lookup_on_current_gpu(p, state.rank);
  }
  const Topology& topo = state.topology;
  const Config& cfg = config();
  DeviceResources& res = device_resources(state);  // collective the first time
  CudaExecutor exec(dtype, op, options.stream, res.scratch);
  const std::size_t esize = size_of(dtype);

  if (comm.size() == 1) {
    exec.copy(recv, send, count * esize);
    exec.fence();
    return;  // the average over one rank is the input itself
  }
  const bool node_step_ready = res.ipc_everywhere || topo.max_local_size == 1;
  if (!node_step_ready) {
    allreduce_staged(send, recv, count, dtype, op, comm, options, res, exec);
    return;
  }
  const ReduceSpec spec{esize, dtype, &exec};
  if (topo.num_nodes == 1) {
    allreduce_shared(*res.arena, MessageView(send, count, esize), MessageView(recv, count, esize),
                     spec, cfg.cuda_direct_bytes);
  } else {
    const InterNodeStep inter{topo.num_nodes, [&](void* shard, std::size_t n) {
                                cross_node_allreduce(res, state, shard, n, dtype, op, exec);
                              }};
    allreduce_hierarchical(res.arena.get(), topo.min_local_size, inter, send, recv, count, spec);
  }
  if (op == ReduceOp::Avg) exec.scale(recv, count, 1.0 / comm.size());
  exec.fence();
}

}  // namespace concord::detail
