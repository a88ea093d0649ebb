// What a communicator keeps for its device collectives, made by the first one.
#pragma once

#include "core/agreement.hpp"
#include "core/communicator_state.hpp"
#include "cuda/cuda_runtime.hpp"
#include "transport/cuda_ipc_arena.hpp"

#include <mpi.h>

#include <memory>
#include <vector>

namespace concord::detail {

class NcclComm;
struct DevicePeerPath;  // dispatch/device_peer_path.hpp

// Which path a communicator's device allreduces take among the ranks of one node:
// the one chosen by size and set-up (Auto), or one fixed for every call, for the
// benchmarks and tests that compare the paths in one run (set on every rank alike).
enum class DevicePathPreference { Auto, DeviceSynchronised, IpcRounds, HostStaging };

struct DeviceResources {
  int device = -1;             // the CUDA device the communicator's collectives run on
  cuda::DeviceBuffer scratch;  // algorithms' scratch (CudaExecutor)
  cuda::PinnedBuffer staging;  // host staging
  // The node's IPC arena; null when this rank is alone on its node or IPC is off
  // or failed somewhere (then ipc_everywhere is false on every rank alike).
  std::unique_ptr<CudaIpcArena> arena;
  bool ipc_everywhere = false;
  // NCCL over the ranks with this rank's local rank (one per node), for the
  // inter-node step; made by its first use (nccl_cross). nccl_tried: whether that happened.
  std::shared_ptr<NcclComm> nccl_cross;
  bool nccl_tried = false;
  // The device-synchronised path, set up by the first call that could take it
  // (device_peer_path); null where it cannot run. peer_tried: set-up happened.
  std::shared_ptr<DevicePeerPath> peer;
  bool peer_tried = false;
  DevicePathPreference preference = DevicePathPreference::Auto;
};

// The communicator's device resources. Collective over the communicator the first
// time (every rank must call it in the same collective). Throws Error(InvalidArgument)
// when called with another current device than the first time.
DeviceResources& device_resources(const CommunicatorState& state);

// Every rank's GPU (the one `device` is on this rank), as CUDA identifies a physical
// GPU, in `comm`'s rank order; and how many ranks of `comm` use this rank's GPU.
// Collective over `comm`, waiting as `wait` says.
std::vector<cudaUUID_t> gpu_uuids(MPI_Comm comm, int device, int rank, const SetupWait& wait);
int ranks_on_my_gpu(MPI_Comm comm, int device, int rank, const SetupWait& wait);

// NCCL over the cross-node communicator, or null (no NCCL build, library or
// agreement: then a warning said why, once). Collective over topology.cross the
// first time: its ranks share a local rank, so they reach here together. Its
// exchanges wait like the transport and give up at the communicator's abort;
// NCCL's own ncclCommInitRank then blocks until its ranks have joined.
NcclComm* nccl_cross(DeviceResources& res, const CommunicatorState& state);

}  // namespace concord::detail
