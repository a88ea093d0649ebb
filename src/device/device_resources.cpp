// The communicator's device resources: IPC arena, NCCL communicator, buffers.
#include "device/device_resources.hpp"

#include "core/agreement.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#if CONCORD_WITH_NCCL
#include "transport/nccl_transport.hpp"
#endif

#include <concord/error.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace concord::detail {
namespace {

bool same_gpu(const cudaUUID_t& a, const cudaUUID_t& b) {
  return std::memcmp(&a, &b, sizeof(cudaUUID_t)) == 0;
}

#if CONCORD_WITH_NCCL
// Whether two ranks of `comm` use the same physical GPU (virtual nodes on one
// machine, or more ranks than GPUs).
bool ranks_share_a_gpu(MPI_Comm comm, int device, int rank) {
  const std::vector<cudaUUID_t> all = gpu_uuids(comm, device, rank);
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      if (same_gpu(all[i], all[j])) return true;
    }
  }
  return false;
}

// Sets up res.nccl_cross, or leaves it null with the reason in `why`.
void make_nccl_cross(DeviceResources& res, const Topology& topo, int rank, std::string& why) {
  const NcclLibrary* lib = config().nccl ? try_nccl(&why) : nullptr;
  if (!all_ranks_ok(topo.cross.get(), lib != nullptr, rank)) return;
  if (ranks_share_a_gpu(topo.cross.get(), res.device, rank)) {
    // NCCL before 2.30 refuses two ranks on one GPU in a communicator.
    if (!nccl_supports_multi_rank_gpu(lib->version)) {
      why = fmt::format("NCCL {} runs no two ranks on one GPU (2.30 does)",
                        nccl_version_string(lib->version));
      return;
    }
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);  // unless the user chose otherwise
  }
  // A failed set-up on one rank must not leave its node peers waiting in the
  // next node step: every rank of the cross communicator agrees to fall back.
  try {
    res.nccl_cross = std::make_shared<NcclComm>(topo.cross.get(), rank);
  } catch (const Error& e) {
    why = e.what();
  }
  if (!all_ranks_ok(topo.cross.get(), res.nccl_cross != nullptr, rank)) {
    res.nccl_cross.reset();
    if (why.empty()) why = "NCCL set-up failed on another node";
  }
}
#endif

}  // namespace

std::vector<cudaUUID_t> gpu_uuids(MPI_Comm comm, int device, int rank) {
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", rank);
  int size = 1;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size", rank);
  std::vector<cudaUUID_t> all(static_cast<std::size_t>(size));
  check_mpi(MPI_Allgather(&prop.uuid, sizeof(cudaUUID_t), MPI_BYTE, all.data(), sizeof(cudaUUID_t),
                          MPI_BYTE, comm),
            "MPI_Allgather", rank);
  return all;
}

int ranks_on_my_gpu(MPI_Comm comm, int device, int rank) {
  const std::vector<cudaUUID_t> all = gpu_uuids(comm, device, rank);
  int me = 0;
  check_mpi(MPI_Comm_rank(comm, &me), "MPI_Comm_rank", rank);
  int count = 0;
  for (const cudaUUID_t& uuid : all) count += same_gpu(uuid, all[static_cast<std::size_t>(me)]);
  return count;
}

NcclComm* nccl_cross(DeviceResources& res, const Topology& topo, int rank) {
#if CONCORD_WITH_NCCL
  if (!res.nccl_tried) {
    res.nccl_tried = true;
    std::string why;
    make_nccl_cross(res, topo, rank, why);
    if (!res.nccl_cross && config().nccl && !why.empty()) {
      fmt::print(stderr,
                 "concord: rank {}: NCCL unavailable ({}); device buffers cross nodes "
                 "through host memory\n",
                 rank, why);
    }
  }
  return res.nccl_cross.get();
#else
  (void)res, (void)topo, (void)rank;
  return nullptr;
#endif
}

DeviceResources& device_resources(const CommunicatorState& state) {
  const int current = cuda::current_device();
  if (state.device_resources) {
    DeviceResources& res = *state.device_resources;
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
  const bool ok =
      agree_or_fall_back(state.comm.get(), why, state.rank,
                         {"CUDA IPC", "device buffers go through pinned host memory instead"},
                         {"CUDA IPC's set-up", &state.abort_signal});
  if (!ok) res->arena.reset();
  res->ipc_everywhere = ok && cfg.cuda_ipc;
  state.device_resources = res;
  return *res;
}

}  // namespace concord::detail
