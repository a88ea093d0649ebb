// dispatch_allreduce and the host paths: validate, classify, agree, choose, run.
#include "dispatch/dispatch.hpp"

#include "collectives/algorithms.hpp"
#include "collectives/shared/node_arena.hpp"
#include "collectives/tuning_table.hpp"
#include "core/communicator_state.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/task_thread.hpp"
#include "core/validate.hpp"
#include "device/device_path.hpp"
#include "dispatch/call_agreement.hpp"
#include "dispatch/paths.hpp"
#include "reduce/host_executor.hpp"
#include "reduce/reduce_kernels.hpp"
#include "transport/mpi_transport.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>

namespace concord::detail {
namespace {

// The size limits of the host shared-memory path on this node's arena (the
// direct limit depends on its rank count), all from the tuning table and the
// variables that override it. Avg never streams its results out: its scale pass
// (run_host_allreduce, or copy_out's per-tensor factors) reads the output again
// at once, and from DRAM if non-temporal stores had just written it around the
// caches (16 MiB float32 Avg at 2 ranks took ~1.3x as long streamed).
SharedLimits host_shared_limits(const CommunicatorState& state, ReduceOp op) {
  const SizeThresholds& t = size_thresholds();
  return {.direct_bytes = t.shm_direct_bytes_for(state.arena->size()),
          .stream_bytes = op == ReduceOp::Avg ? SIZE_MAX : t.shm_stream_bytes,
          .single_copy_bytes = t.shm_single_copy_bytes,
          .single_copy_round_bytes = t.shm_single_copy_round_bytes,
          .measure_single_copy = state.arena_measures_paths};
}

// How many of each node's ranks carry a Hierarchical message across the
// network: all of them (one shard each, the smallest node's count) from
// hierarchical_spread_bytes, else one leader per node.
int network_shard_owners(std::size_t bytes, const Topology& topo) {
  return bytes >= size_thresholds().hierarchical_spread_bytes ? topo.min_local_size : 1;
}

// Hierarchical's step across nodes in pieces, each run on the communicator's
// network thread while the calling thread works on shared memory. That needs
// every rank's MPI to take calls from any thread (the user's other threads may
// call MPI meanwhile; concord's own initialisation asks for it). Without it there
// is nothing to overlap, so no pieces: one step, as every rank agrees.
void overlap_network(const CommunicatorState& state, InterNodeStep& inter, std::size_t elem_size) {
  const std::size_t piece = size_thresholds().hierarchical_piece_bytes;
  if (piece == 0 || !state.every_rank_thread_multiple) return;
  inter.piece_elements = std::max<std::size_t>(1, piece / elem_size);
  if (inter.ranks < 2) return;  // this rank carries no shard across
  try {
    if (!state.network_thread) state.network_thread = std::make_shared<TaskThread>();
  } catch (const std::exception& e) {
    // No thread (a limit on processes): the same pieces on the calling thread,
    // still matching the other ranks'.
    static std::once_flag warned;
    std::call_once(warned, [&] {
      fmt::print(stderr,
                 "concord: rank {}: no thread for Hierarchical's network step ({}); its pieces "
                 "run on the calling thread\n",
                 state.rank, e.what());
    });
    return;
  }
  TaskThread& thread = *state.network_thread;
  inter.start = [&thread, step = inter.allreduce](void* shard, std::size_t n) {
    return thread.submit([step, shard, n] { step(shard, n); });
  };
}

void validate_options(const char* what, const AllreduceOptions& options, int rank) {
  if (!known(options.algorithm)) {
    throw Error(
        ErrorCode::InvalidArgument, rank,
        fmt::format("{}: unknown Algorithm value {}", what, static_cast<int>(options.algorithm)));
  }
  if (options.ring_segment_bytes != 0 && (options.ring_segment_bytes < kMinRingSegmentBytes ||
                                          options.ring_segment_bytes > kMaxRingSegmentBytes)) {
    throw Error(
        ErrorCode::InvalidArgument, rank,
        fmt::format("{}: ring_segment_bytes {} is outside {} … {} (0 takes the default)", what,
                    options.ring_segment_bytes, kMinRingSegmentBytes, kMaxRingSegmentBytes));
  }
  if (!(options.agreement_timeout_s >= 0) || !std::isfinite(options.agreement_timeout_s)) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("{}: agreement_timeout_s {} is not a number of seconds >= 0 (0: no "
                            "agreement)",
                            what, options.agreement_timeout_s));
  }
}

// Where send and recv lie: as the options say, else as the pointer-attribute
// cache says. Both must be the same kind.
Device buffers_device(const char* what, const void* send, const void* recv, std::size_t count,
                      const AllreduceOptions& options, int rank) {
  if (options.device) {
    if (*options.device != Device::Cpu && *options.device != Device::Cuda) {
      throw Error(
          ErrorCode::InvalidArgument, rank,
          fmt::format("{}: unknown Device value {}", what, static_cast<int>(*options.device)));
    }
    if (*options.device == Device::Cuda) require_cuda(what, rank);
    return *options.device;
  }
  if (count == 0) return Device::Cpu;
  const Device s = classify_pointer(send, rank);
  const Device r = send == recv ? s : classify_pointer(recv, rank);
  if (s != r) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("{}: send is {} memory but recv is {} memory; both must be on the "
                            "same kind of device",
                            what, to_string(s), to_string(r)));
  }
  return s;
}

}  // namespace

bool ranks_share_a_node(const Communicator& comm) {
  return comm.state().ranks_share_a_node;
}

Path choose_host_path(const Communicator& comm, Algorithm algorithm) {
  if (comm.size() == 1) return Path::OneRank;
  if (algorithm == Algorithm::Hierarchical && ranks_share_a_node(comm)) {
    const CommunicatorState& state = comm.state();
    node_arena(state);  // collective the first time
    if (state.arena_everywhere) {
      return state.topology.num_nodes == 1 ? Path::SharedMemory : Path::Hierarchical;
    }
  }
  // Flat algorithms, and Hierarchical without shared memory (no two ranks share
  // a node, or CONCORD_SHM=0, or set-up failed): point-to-point over MPI.
  return Path::Flat;
}

void run_host_allreduce(const Call& call, const Communicator& comm) {
  const CommunicatorState& state = comm.state();
  const Topology& topo = state.topology;
  const std::size_t bytes = call.count * size_of(call.dtype);
  HostExecutor exec(call.dtype, call.op);
  const ReduceContext ctx{size_of(call.dtype), call.dtype, &exec};
  switch (choose_host_path(comm, call.algorithm)) {
    case Path::OneRank:
      if (call.send != call.recv) std::memcpy(call.recv, call.send, bytes);
      return;  // the average over one rank is the input itself
    case Path::SharedMemory:
      allreduce_shared(*state.arena, MessageView(call.send, call.count, ctx.elem_size),
                       MessageView(call.recv, call.count, ctx.elem_size), ctx,
                       host_shared_limits(state, call.op));
      break;
    case Path::Hierarchical: {
      // Across nodes: a flat algorithm over MPI among the ranks with this local rank.
      MpiTransport cross(topo.cross.get(), &state.abort_signal);
      InterNodeStep inter;
      inter.ranks = cross.size();
      inter.allreduce = [&](void* shard, std::size_t n) {
        const Algorithm flat = choose_flat_algorithm(n * ctx.elem_size, cross.size());
        allreduce_flat(flat, cross, shard, n, ctx, call.ring_segment_bytes);
      };
      overlap_network(state, inter, ctx.elem_size);
      allreduce_hierarchical(state.arena.get(), network_shard_owners(bytes, topo), inter, call.send,
                             call.recv, call.count, ctx);
      break;
    }
    case Path::Flat:
    case Path::Staged:
    case Path::DevicePeer: {  // (the last two are device paths: never chosen here)
      if (call.send != call.recv) std::memcpy(call.recv, call.send, bytes);
      const Algorithm flat = call.algorithm == Algorithm::Hierarchical
                                 ? choose_flat_algorithm(bytes, comm.size())
                                 : call.algorithm;
      MpiTransport transport(comm.mpi_comm(), &state.abort_signal);
      allreduce_flat(flat, transport, call.recv, call.count, ctx, call.ring_segment_bytes);
      break;
    }
  }
  if (call.op == ReduceOp::Avg) scale(call.recv, call.count, call.dtype, 1.0 / comm.size());
}

void dispatch_allreduce(const char* what, const void* send, void* recv, std::size_t count,
                        DataType dtype, ReduceOp op, const Communicator& comm,
                        const AllreduceOptions& options) {
  ensure_not_finalized("concord::allreduce");
  check_not_failed(comm);  // a device allreduce's recorded timeout too
  const Config& cfg = config();
  const int rank = comm.rank();

  std::optional<Error> local_error;
  Device device = Device::Cpu;
  try {
    validate_buffers(what, send, recv, count, dtype, op, rank);
    validate_options(what, options, rank);
    device = buffers_device(what, send, recv, count, options, rank);
    if (device == Device::Cuda && options.agreement_timeout_s > 0) {
      // The device paths' waits are not poisoned when a checked call fails.
      throw Error(
          ErrorCode::InvalidArgument, rank,
          fmt::format("{}: agreement_timeout_s (a checked call) takes host buffers only", what));
    }
  } catch (const Error& e) {
    local_error = e;
  }
  const std::size_t bytes = local_error ? 0 : count * size_of(dtype);
  const Algorithm algorithm = local_error ? Algorithm::Auto
                                          : resolve_algorithm(options.algorithm, bytes, comm.size(),
                                                              ranks_share_a_node(comm));
  const std::size_t segment =
      options.ring_segment_bytes != 0 ? options.ring_segment_bytes : cfg.ring_segment_bytes;
  const CallSignature signature{count,
                                static_cast<std::int64_t>(dtype),
                                static_cast<std::int64_t>(op),
                                static_cast<std::int64_t>(algorithm),
                                static_cast<std::int64_t>(device),
                                static_cast<std::int64_t>(segment)};
  if (options.agreement_timeout_s > 0) {
    agree_within(what, options.label, signature, !local_error, comm, options.agreement_timeout_s);
  } else if (cfg.check_args) {
    failing_when_abandoned(comm, [&] { check_agreement(what, signature, !local_error, comm); });
  }
  if (local_error) throw *local_error;
  if (count == 0) return;
  const Call call{send,      recv,    count,         dtype, op, options.algorithm,
                  algorithm, segment, options.stream};
  failing_when_abandoned(comm, [&] {
    if (device == Device::Cuda) {
      run_device_allreduce(call, comm, options.device.has_value());
    } else {
      run_host_allreduce(call, comm);
    }
  });
}

bool tensors_in_place_supported(const Communicator& comm, Algorithm algorithm) {
  if (comm.size() < 2 || !ranks_share_a_node(comm)) return false;
  // Bytes do not matter here: with ranks sharing a node Auto is Hierarchical.
  // The first choice makes the arena: a rank that never comes fails `comm`.
  bool shared = false;
  failing_when_abandoned(comm, [&] {
    shared = choose_host_path(comm, resolve_algorithm(algorithm, 0, comm.size(), true)) ==
             Path::SharedMemory;
  });
  return shared;
}

void allreduce_tensors_in_place(std::vector<TensorSpan> tensors, DataType dtype, ReduceOp op,
                                const Communicator& comm) {
  ensure_not_finalized("concord::allreduce");
  check_not_failed(comm);
  HostExecutor exec(dtype, op);
  const ReduceContext ctx{size_of(dtype), dtype, &exec};
  const MessageView view(std::move(tensors), ctx.elem_size);
  if (view.count() == 0) return;
  failing_when_abandoned(comm, [&] {
    allreduce_shared(*comm.state().arena, view, view, ctx, host_shared_limits(comm.state(), op));
  });
}

// As the allreduce's data phase: a wait past its deadline, or an abort, fails
// `comm`, so that a later collective cannot meet messages this one left behind.
void dispatch_broadcast(void* buf, std::size_t bytes, int root, const Communicator& comm) {
  check_not_failed(comm);
  if (comm.size() == 1 || bytes == 0) return;
  failing_when_abandoned(comm, [&] {
    MpiTransport transport(comm.mpi_comm(), &comm.state().abort_signal);
    broadcast_binomial(transport, buf, bytes, root);
  });
}

void dispatch_allgatherv(const void* mine, void* out, const std::vector<std::size_t>& block_bytes,
                         const Communicator& comm) {
  check_not_failed(comm);
  failing_when_abandoned(comm, [&] {
    MpiTransport transport(comm.mpi_comm(), &comm.state().abort_signal);
    allgatherv_ring(transport, mine, out, block_bytes);
  });
}

void dispatch_alltoallv(const void* send, const std::vector<std::size_t>& send_bytes, void* recv,
                        const std::vector<std::size_t>& recv_bytes, const Communicator& comm) {
  check_not_failed(comm);
  failing_when_abandoned(comm, [&] {
    MpiTransport transport(comm.mpi_comm(), &comm.state().abort_signal);
    alltoallv_pairwise(transport, send, send_bytes, recv, recv_bytes);
  });
}

}  // namespace concord::detail
