// A communicator's device-synchronised path (collectives/device_peer.hpp): the IPC
// memory its kernels meet in, the record they report a timeout in, and whether the
// node's ranks' kernels run at the same time, which the path needs. Set up by the
// first device call that could take the path. CUDA builds only.
#pragma once

#include "collectives/device_peer.hpp"
#include "core/communicator_state.hpp"
#include "cuda/cuda_runtime.hpp"
#include "device/device_resources.hpp"
#include "transport/cuda_ipc_arena.hpp"

#include <memory>

namespace concord::detail {

struct DevicePeerPath {
  std::unique_ptr<CudaIpcArena> arena;  // null where the ranks' kernels do not run at once
  cuda::PinnedBuffer pinned;            // space.record and the probe's result
  PeerSpace space;
  // Whether the path runs: the probe found the ranks' kernels running at the same
  // time (MPS, or a GPU each), or CONCORD_CUDA_PEER=on said so. The same on every rank.
  bool concurrent = false;
  double probe_meeting_ns = 0;  // the probe's mean meeting, where it ran and none timed out
};

// The path of `state`'s node, or null where it cannot run: CONCORD_CUDA_PEER=off,
// the ranks span nodes, a node of one rank or of more than cuda::kMaxPeerRanks, no
// IPC. Collective over the communicator the first time (every rank calls it in the
// same device allreduce; the outcome is the same on every rank). The probe runs on
// `stream`. Where the ranks' kernels do not run at once, the path is kept with
// `concurrent` false (and no memory), and the node's first rank says so once.
DevicePeerPath* device_peer_path(DeviceResources& res, const CommunicatorState& state,
                                 CudaStream stream);

// The most blocks one of the path's kernels may run on `state`'s node: the tuning
// table's cuda_peer_blocks, within the ranks' share of their GPU's resident blocks
// (block b of a rank waits for block b of each peer, so every block of every rank's
// kernel must be on the GPU at once). The same on every rank; collective over the node.
int peer_block_limit(const CommunicatorState& state);

}  // namespace concord::detail
