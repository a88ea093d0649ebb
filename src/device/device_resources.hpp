// What a communicator keeps for its device collectives, made by the first one.
#pragma once

#include "core/communicator_state.hpp"
#include "cuda/cuda_runtime.hpp"
#include "transport/cuda_ipc_arena.hpp"

#include <memory>

namespace concord::detail {

class NcclComm;

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
};

// The communicator's device resources. Collective over the communicator the first
// time (every rank must call it in the same collective). Throws Error(InvalidArgument)
// when called with another current device than the first time.
DeviceResources& device_resources(const CommunicatorState& state);

// NCCL over the cross-node communicator, or null (no NCCL build, library or
// agreement: then a warning said why, once). Collective over topology.cross the
// first time: its ranks share a local rank, so they reach here together.
NcclComm* nccl_cross(DeviceResources& res, const Topology& topo, int rank);

}  // namespace concord::detail
