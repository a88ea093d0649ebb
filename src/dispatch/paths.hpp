// The paths dispatch_allreduce chooses among, for its own files (host paths in
// dispatch.cpp, device paths in device_paths.cpp or device_paths_none.cpp).
#pragma once

#include "dispatch/dispatch.hpp"

namespace concord::detail {

// One allreduce after validation and agreement: count > 0, the same on every rank.
struct Call {
  const void* send;
  void* recv;
  std::size_t count;
  DataType dtype;
  ReduceOp op;
  Algorithm requested;             // as the caller asked (staged chunks resolve it again)
  Algorithm algorithm;             // resolved for the whole message, never Auto
  std::size_t ring_segment_bytes;  // resolved, never 0
  CudaStream stream;               // device buffers: what the call is ordered on
};

// Whether ranks of `comm` share a node and shared memory is on (the same on every rank).
bool ranks_share_a_node(const Communicator& comm);

// The host path for `algorithm` on `comm`; collective the first time it needs
// the node's shared-memory arena.
Path choose_host_path(const Communicator& comm, Algorithm algorithm);

// Host buffers: the chosen path, then Avg's scaling.
void run_host_allreduce(const Call& call, const Communicator& comm);

// Device buffers (CUDA builds; a clear error otherwise): the path chosen from the
// communicator's device resources, then Avg's scaling; the staged path runs each
// chunk through run_host_allreduce.
void run_device_allreduce(const Call& call, const Communicator& comm, bool device_from_options);

// Poisons the IPC arenas of `state`'s device paths where it has them, as
// fail_communicator does the host arena: a peer waiting on this rank in the IPC
// rounds then fails instead of waiting for ever. Nothing in a build without CUDA.
void poison_device_arenas(const CommunicatorState& state);

}  // namespace concord::detail
