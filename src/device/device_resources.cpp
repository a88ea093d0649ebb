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

// How the device set-ups' exchanges wait: a rank that never comes to its first
// device call fails its peers at the transport's deadline, naming `step`, and
// the communicator's abort stops them.
SetupWait setup_wait(const CommunicatorState& state, std::string_view step) {
  return {step, &state.abort_signal};
}

bool same_gpu(const cudaUUID_t& a, const cudaUUID_t& b) {
  return std::memcmp(&a, &b, sizeof(cudaUUID_t)) == 0;
}

#if CONCORD_WITH_NCCL
// Whether two ranks of `comm` use the same physical GPU (virtual nodes on one
// machine, or more ranks than GPUs).
bool ranks_share_a_gpu(MPI_Comm comm, int device, int rank, const SetupWait& wait) {
  const std::vector<cudaUUID_t> all = gpu_uuids(comm, device, rank, wait);
  for (std::size_t i = 0; i < all.size(); ++i) {
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      if (same_gpu(all[i], all[j])) return true;
    }
  }
  return false;
}

// Sets up res.nccl_cross, or leaves it null with the reason in `why`.
void make_nccl_cross(DeviceResources& res, const CommunicatorState& state, std::string& why) {
  const int rank = state.rank;
  MPI_Comm cross = state.topology.cross.get();
  const SetupWait wait = setup_wait(state, "NCCL's set-up");
  const NcclLibrary* lib = config().nccl ? try_nccl(&why) : nullptr;
  if (!all_ranks_ok(cross, lib != nullptr, rank, wait)) return;
  if (ranks_share_a_gpu(cross, res.device, rank, wait)) {
    // NCCL before 2.30 refuses two ranks on one GPU in a communicator. Agreed:
    // nodes may load different NCCLs, and every rank must take the same path.
    const bool supported = nccl_supports_multi_rank_gpu(lib->version);
    if (!all_ranks_ok(cross, supported, rank, wait)) {
      why = supported ? std::string("another node's NCCL runs no two ranks on one GPU")
                      : fmt::format("NCCL {} runs no two ranks on one GPU (2.30 does)",
                                    nccl_version_string(lib->version));
      return;
    }
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);  // unless the user chose otherwise
  }
  // A failed set-up on one rank must not leave its node peers waiting in the
  // next node step: every rank of the cross communicator agrees to fall back.
  try {
    res.nccl_cross = std::make_shared<NcclComm>(cross, rank, wait);
  } catch (const Error& e) {
    if (ends_the_setup(e)) throw;
    why = e.what();
  }
  if (!all_ranks_ok(cross, res.nccl_cross != nullptr, rank, wait)) {
    res.nccl_cross.reset();
    if (why.empty()) why = "NCCL set-up failed on another node";
  }
}
#endif

}  // namespace

std::vector<cudaUUID_t> gpu_uuids(MPI_Comm comm, int device, int rank, const SetupWait& wait) {
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", rank);
  return gather_over_ranks(comm, prop.uuid, rank, wait);
}

int ranks_on_my_gpu(MPI_Comm comm, int device, int rank, const SetupWait& wait) {
  const std::vector<cudaUUID_t> all = gpu_uuids(comm, device, rank, wait);
  int me = 0;
  check_mpi(MPI_Comm_rank(comm, &me), "MPI_Comm_rank", rank);
  int count = 0;
  for (const cudaUUID_t& uuid : all) count += same_gpu(uuid, all[static_cast<std::size_t>(me)]);
  return count;
}

NcclComm* nccl_cross(DeviceResources& res, const CommunicatorState& state) {
#if CONCORD_WITH_NCCL
  if (!res.nccl_tried) {
    res.nccl_tried = true;
    std::string why;
    make_nccl_cross(res, state, why);
    if (!res.nccl_cross && config().nccl && !why.empty()) {
      fmt::print(stderr,
                 "concord: rank {}: NCCL unavailable ({}); device buffers cross nodes "
                 "through host memory\n",
                 state.rank, why);
    }
  }
  return res.nccl_cross.get();
#else
  (void)res, (void)state;
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
      res->arena = CudaIpcArena::create(topo.local.get(), cfg.cuda_ipc_region_bytes, state.rank,
                                        &why, setup_wait(state, "CUDA IPC's set-up"));
    } catch (const Error& e) {
      if (ends_the_setup(e)) throw;
      why = e.what();
    }
  }
  const bool ok =
      agree_or_fall_back(state.comm.get(), why, state.rank,
                         {"CUDA IPC", "device buffers go through pinned host memory instead"},
                         setup_wait(state, "the ranks' agreement on CUDA IPC"));
  if (!ok) res->arena.reset();
  res->ipc_everywhere = ok && cfg.cuda_ipc;
  state.device_resources = res;
  return *res;
}

}  // namespace concord::detail
