// The device paths of dispatch_allreduce, chosen by choose_device_path, the same on
// every rank:
//   - the ranks of one node whose kernels run at the same time (MPS, or a GPU each):
//     the device-synchronised path (collectives/device_peer.hpp), which only enqueues;
//   - ranks of a node share CUDA IPC regions (also several ranks on one GPU): the
//     shared-memory algorithms run with the CUDA executor (copies and reduction
//     kernels on the caller's stream), meeting on the host ("the IPC rounds"), and
//     across nodes each shard goes over NCCL (or, without NCCL, through pinned host
//     memory over MPI);
//   - one rank per node: the same, without the node step;
//   - otherwise (IPC off or failed), and small messages where ranks share a GPU
//     without running their kernels at once: Staged, pinned host memory in chunks
//     around the host paths.
#include "collectives/algorithms.hpp"
#include "collectives/shared/message_view.hpp"
#include "collectives/tuning_table.hpp"
#include "core/config.hpp"
#include "device/device_path.hpp"
#include "device/device_resources.hpp"
#include "dispatch/call_agreement.hpp"
#include "dispatch/device_peer_path.hpp"
#include "dispatch/paths.hpp"
#include "reduce/cuda_executor.hpp"
#include "reduce/host_executor.hpp"
#include "transport/mpi_transport.hpp"
#if CONCORD_WITH_NCCL
#include "transport/nccl_transport.hpp"
#endif

#include <concord/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace concord::detail {
namespace {

// One shard among the ranks with this rank's local rank, in place on the device.
void cross_node_allreduce(DeviceResources& res, const CommunicatorState& state, void* shard,
                          std::size_t count, const Call& call, CudaExecutor& exec) {
  const Topology& topo = state.topology;
  const std::size_t esize = size_of(call.dtype);
  const std::size_t bytes = count * esize;
  const ReduceContext ctx{esize, call.dtype, &exec};
#if CONCORD_WITH_NCCL
  if (NcclComm* nccl = nccl_cross(res, state)) {
    NcclTransport transport(*nccl, exec.stream());
    // NCCL runs only algorithms made of one exchange per step (see nccl_transport.hpp):
    // recursive doubling or reduce-scatter + allgather.
    const Algorithm algorithm = bytes <= size_thresholds().nccl_recursive_doubling_bytes
                                    ? Algorithm::RecursiveDoubling
                                    : Algorithm::ReduceScatterAllgather;
    allreduce_flat(algorithm, transport, shard, count, ctx, 0);
    return;
  }
#endif
  // Host staging: the shard to pinned memory, a flat allreduce over MPI, back.
  res.staging.reserve(bytes);
  std::byte* host = res.staging.get();
  exec.copy(host, shard, bytes);
  exec.fence();
  HostExecutor host_exec(call.dtype, call.op);
  const ReduceContext host_ctx{esize, call.dtype, &host_exec};
  MpiTransport cross(topo.cross.get(), &state.abort_signal);
  allreduce_flat(choose_flat_algorithm(bytes, cross.size()), cross, host, count, host_ctx,
                 config().ring_segment_bytes);
  exec.copy(shard, host, bytes);
}

// Pinned-host staging around the host paths, chunk by chunk.
void allreduce_staged(const Call& call, const Communicator& comm, DeviceResources& res,
                      CudaExecutor& exec) {
  const std::size_t esize = size_of(call.dtype);
  const std::size_t chunk = std::max<std::size_t>(1, config().cuda_staging_bytes / esize);
  res.staging.reserve(std::min(call.count, chunk) * esize);
  std::byte* host = res.staging.get();
  for (std::size_t offset = 0; offset < call.count; offset += chunk) {
    const std::size_t n = std::min(chunk, call.count - offset);
    exec.copy(host, static_cast<const std::byte*>(call.send) + offset * esize, n * esize);
    exec.fence();
    Call piece = call;
    piece.send = host;
    piece.recv = host;
    piece.count = n;
    // Resolved again for the chunk's size, as a host call of that size would be.
    piece.algorithm =
        resolve_algorithm(call.requested, n * esize, comm.size(), ranks_share_a_node(comm));
    run_host_allreduce(piece, comm);
    exec.copy(static_cast<std::byte*>(call.recv) + offset * esize, host, n * esize);
    exec.fence();  // the staging buffer is free again
  }
}

// The one place a device call's path is chosen: from the topology, what set-up found
// (IPC everywhere, the device-synchronised path and whether the ranks' kernels run at
// once), the message size and the communicator's preference.
Path choose_device_path(const Communicator& comm, DeviceResources& res, std::size_t bytes,
                        CudaStream stream) {
  const CommunicatorState& state = comm.state();
  const Topology& topo = state.topology;
  if (comm.size() == 1) return Path::OneRank;
  if (res.preference == DevicePathPreference::HostStaging) return Path::Staged;
  if (!res.ipc_everywhere && topo.max_local_size > 1) return Path::Staged;
  if (topo.num_nodes != 1) return Path::Hierarchical;
  if (res.preference == DevicePathPreference::IpcRounds) return Path::SharedMemory;
  const DevicePeerPath* peer = device_peer_path(res, state, stream);  // collective the first time
  if (res.preference == DevicePathPreference::DeviceSynchronised) {
    if (peer == nullptr || !peer->concurrent) {
      throw Error(ErrorCode::InvalidArgument, state.rank,
                  "allreduce: the device-synchronised path was asked for, but it cannot run on "
                  "this communicator (see the warnings above; CONCORD_CUDA_PEER=on skips the "
                  "probe)");
    }
    return Path::DevicePeer;
  }
  const SizeThresholds& t = size_thresholds();
  if (peer == nullptr) return Path::SharedMemory;
  if (peer->concurrent)
    return bytes <= t.cuda_peer_max_bytes ? Path::DevicePeer : Path::SharedMemory;
  return bytes <= t.cuda_unshared_staging_bytes ? Path::Staged : Path::SharedMemory;
}

}  // namespace

void check_device_failure(const Communicator& comm) {
  const CommunicatorState& state = comm.state();
  const DeviceResources* res = state.device_resources.get();
  if (res == nullptr || !res->peer || res->peer->space.record == nullptr) return;
  try {
    check_peer_space(res->peer->space, state.rank);
  } catch (const Error& e) {
    fail_communicator(comm, e);
    throw;
  }
}

void poison_device_arenas(const CommunicatorState& state) {
  DeviceResources* res = state.device_resources.get();
  if (res == nullptr) return;
  if (res->arena) res->arena->poison();
  if (res->peer && res->peer->arena) res->peer->arena->poison();
}

void run_device_allreduce(const Call& call, const Communicator& comm, bool device_from_options) {
  const CommunicatorState& state = comm.state();
  // Without options.device, classify_pointer has checked the buffers' GPU already.
  if (device_from_options) {
    check_on_current_gpu(call.send, state.rank);
    check_on_current_gpu(call.recv, state.rank);
  }
  const Topology& topo = state.topology;
  if (!state.device_resources && cuda::is_capturing(call.stream)) {
    refuse_capture(
        "the first device allreduce on a communicator sets it up (allocates device "
        "memory and synchronises): make one before capturing",
        state.rank);
  }
  DeviceResources& res = device_resources(state);  // collective the first time
  CudaExecutor exec(call.dtype, call.op, call.stream, res.scratch);
  const std::size_t esize = size_of(call.dtype);
  const ReduceContext ctx{esize, call.dtype, &exec};
  const Path path = choose_device_path(comm, res, call.count * esize, call.stream);
  if (path != Path::OneRank && path != Path::DevicePeer && cuda::is_capturing(call.stream)) {
    refuse_capture(
        "this call takes a path whose ranks meet on the host and synchronise the "
        "stream; only the device-synchronised path can be captured (docs/GPU.md)",
        state.rank);
  }

  switch (path) {
    case Path::OneRank:
      exec.copy(call.recv, call.send, call.count * esize);
      return;  // the average over one rank is the input itself
    case Path::DevicePeer:
      res.peer->allreduce(call.send, call.recv, call.count, call.dtype, call.op, call.stream);
      if (call.op == ReduceOp::Avg) exec.scale(call.recv, call.count, 1.0 / comm.size());
      return;  // queued on the stream: nothing here waits for the GPU
    case Path::Staged:
      allreduce_staged(call, comm, res, exec);
      return;
    case Path::SharedMemory:
      allreduce_shared(*res.arena, MessageView(call.send, call.count, esize),
                       MessageView(call.recv, call.count, esize), ctx,
                       SharedLimits{size_thresholds().cuda_direct_bytes});
      break;
    case Path::Hierarchical:
    case Path::Flat: {
      // One step on this thread: the device's stream orders the node's phases.
      InterNodeStep inter;
      inter.ranks = topo.num_nodes;
      inter.allreduce = [&](void* shard, std::size_t n) {
        cross_node_allreduce(res, state, shard, n, call, exec);
      };
      allreduce_hierarchical(res.arena.get(), topo.min_local_size, inter, call.send, call.recv,
                             call.count, ctx);
      break;
    }
  }
  if (call.op == ReduceOp::Avg) exec.scale(call.recv, call.count, 1.0 / comm.size());
  exec.fence();
}

}  // namespace concord::detail
