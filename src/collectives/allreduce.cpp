// The public blocking allreduce: validate, pick an algorithm, run it on its
// transports, average.
#include <concord/allreduce.hpp>
#include <concord/error.hpp>

#include "collectives/algorithms.hpp"
#include "collectives/allreduce_segments.hpp"
#include "collectives/host_executor.hpp"
#include "collectives/node_arena.hpp"
#include "collectives/tuning_table.hpp"
#include "core/communicator_state.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/validate.hpp"
#include "device/device_path.hpp"
#include "reduce/reduce_kernels.hpp"
#include "transport/mpi_transport.hpp"

#include <fmt/format.h>

#include <cstring>
#include <optional>

namespace concord {
namespace {

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
    if (*options.device == Device::Cuda && !cuda_built()) {
      throw Error(ErrorCode::InvalidArgument, rank,
                  fmt::format("{}: Device::Cuda buffers need a concord built with CUDA "
                              "(CONCORD_WITH_CUDA found no nvcc when this one was configured)",
                              what));
    }
    if (*options.device == Device::Cuda && !cuda_available()) {
      throw Error(
          ErrorCode::InvalidArgument, rank,
          fmt::format("{}: Device::Cuda buffers, but this process sees no CUDA device", what));
    }
    return *options.device;
  }
  if (count == 0) return Device::Cpu;
  const Device s = detail::classify_pointer(send, rank);
  const Device r = send == recv ? s : detail::classify_pointer(recv, rank);
  if (s != r) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("{}: send is {} memory but recv is {} memory; both must be on the "
                            "same kind of device",
                            what, to_string(s), to_string(r)));
  }
  return s;
}

}  // namespace

void allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
               const Communicator& comm, const AllreduceOptions& options) {
  constexpr const char* kWhat = "allreduce";
  detail::ensure_not_finalized("concord::allreduce");
  const detail::Config& config = detail::config();
  const int rank = comm.rank();
  const int size = comm.size();

  std::optional<Error> local_error;
  Device device = Device::Cpu;
  try {
    detail::validate_buffers(kWhat, send, recv, count, dtype, op, rank);
    if (static_cast<int>(options.algorithm) < 0 ||
        static_cast<int>(options.algorithm) > static_cast<int>(Algorithm::Hierarchical)) {
      throw Error(ErrorCode::InvalidArgument, rank,
                  fmt::format("{}: unknown Algorithm value {}", kWhat,
                              static_cast<int>(options.algorithm)));
    }
    if (options.ring_segment_bytes != 0 &&
        (options.ring_segment_bytes < detail::kMinRingSegmentBytes ||
         options.ring_segment_bytes > detail::kMaxRingSegmentBytes)) {
      throw Error(ErrorCode::InvalidArgument, rank,
                  fmt::format("{}: ring_segment_bytes {} is outside {} … {} (0 takes the default)",
                              kWhat, options.ring_segment_bytes, detail::kMinRingSegmentBytes,
                              detail::kMaxRingSegmentBytes));
    }
    device = buffers_device(kWhat, send, recv, count, options, rank);
  } catch (const Error& e) {
    local_error = e;
  }
  const std::size_t bytes = local_error ? 0 : count * size_of(dtype);
  const detail::Topology& topo = comm.state().topology;
  const bool share_a_node = config.shm && topo.max_local_size > 1;
  const Algorithm algorithm =
      local_error ? Algorithm::Auto
                  : detail::resolve_algorithm(options.algorithm, bytes, size, share_a_node);
  const std::size_t segment =
      options.ring_segment_bytes != 0 ? options.ring_segment_bytes : config.ring_segment_bytes;
  if (config.check_args) {
    detail::check_agreement(kWhat,
                            {count, static_cast<std::int64_t>(dtype), static_cast<std::int64_t>(op),
                             static_cast<std::int64_t>(algorithm),
                             static_cast<std::int64_t>(device), static_cast<std::int64_t>(segment)},
                            !local_error, comm);
  }
  if (local_error) throw *local_error;
  if (count == 0) return;
  if (device == Device::Cuda) {
    detail::allreduce_device(send, recv, count, dtype, op, comm, options);
    return;
  }

  if (size == 1) {
    if (send != recv) std::memcpy(recv, send, bytes);
    return;  // the average over one rank is the input itself
  }

  detail::HostExecutor exec(dtype, op);
  const detail::ReduceSpec spec{size_of(dtype), dtype, &exec};
  bool done = false;
  if (algorithm == Algorithm::Hierarchical && share_a_node) {
    const detail::CommunicatorState& state = comm.state();
    detail::SharedArena* arena = detail::node_arena(state);  // collective the first time
    if (state.arena_everywhere) {
      if (topo.num_nodes == 1) {
        detail::allreduce_shared(*arena, detail::MessageView(send, count, spec.elem_size),
                                 detail::MessageView(recv, count, spec.elem_size), spec,
                                 config.shm_direct_bytes);
      } else {
        detail::MpiTransport cross(topo.cross.get());
        const detail::InterNodeStep inter{
            cross.size(), [&](void* shard, std::size_t n) {
              const Algorithm flat =
                  detail::choose_flat_algorithm(n * spec.elem_size, cross.size());
              detail::allreduce_flat(flat, cross, shard, n, spec, segment);
            }};
        detail::allreduce_hierarchical(arena, topo.min_local_size, inter, send, recv, count, spec);
      }
      done = true;
    }
  }
  if (!done) {
    // Flat algorithms, and Hierarchical without shared memory (no two ranks
    // share a node, or CONCORD_SHM=0, or set-up failed): point-to-point over MPI.
    if (send != recv) std::memcpy(recv, send, bytes);
    const Algorithm flat = algorithm == Algorithm::Hierarchical
                               ? detail::choose_flat_algorithm(bytes, size)
                               : algorithm;
    detail::MpiTransport transport(comm.mpi_comm());
    detail::allreduce_flat(flat, transport, recv, count, spec, segment);
  }
  if (op == ReduceOp::Avg) detail::scale(recv, count, dtype, 1.0 / size);
}

namespace detail {

bool segments_supported(const Communicator& comm, Algorithm algorithm) {
  const Config& cfg = config();
  const Topology& topo = comm.state().topology;
  const bool share_a_node = cfg.shm && topo.max_local_size > 1;
  if (comm.size() < 2 || !share_a_node || topo.num_nodes != 1) return false;
  // Bytes do not matter here: with ranks sharing a node Auto is Hierarchical.
  if (resolve_algorithm(algorithm, 0, comm.size(), share_a_node) != Algorithm::Hierarchical) {
    return false;
  }
  node_arena(comm.state());  // collective the first time
  return comm.state().arena_everywhere;
}

void allreduce_segments(std::vector<Segment> segments, DataType dtype, ReduceOp op,
                        const Communicator& comm) {
  ensure_not_finalized("concord::allreduce");
  HostExecutor exec(dtype, op);
  const ReduceSpec spec{size_of(dtype), dtype, &exec};
  const MessageView view(std::move(segments), spec.elem_size);
  if (view.count() == 0) return;
  allreduce_shared(*comm.state().arena, view, view, spec, config().shm_direct_bytes);
}

}  // namespace detail
}  // namespace concord
