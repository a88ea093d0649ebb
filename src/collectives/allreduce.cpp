// The public blocking allreduce: validate, pick an algorithm, run it on the MPI
// transport, average.
#include <concord/allreduce.hpp>
#include <concord/error.hpp>

#include "collectives/algorithms.hpp"
#include "collectives/tuning_table.hpp"
#include "core/communicator_state.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/validate.hpp"
#include "reduce/reduce_kernels.hpp"
#include "transport/mpi_transport.hpp"

#include <fmt/format.h>

#include <cstring>
#include <optional>

namespace concord {

void allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
               const Communicator& comm, const AllreduceOptions& options) {
  constexpr const char* kWhat = "allreduce";
  detail::ensure_not_finalized("concord::allreduce");
  const detail::Config& config = detail::config();
  const int rank = comm.rank();
  const int size = comm.size();

  std::optional<Error> local_error;
  try {
    detail::validate_buffers(kWhat, send, recv, count, dtype, op, rank);
    if (static_cast<int>(options.algorithm) < 0 ||
        static_cast<int>(options.algorithm) > static_cast<int>(Algorithm::Hierarchical)) {
      throw Error(ErrorCode::InvalidArgument, rank,
                  fmt::format("{}: unknown Algorithm value {}", kWhat,
                              static_cast<int>(options.algorithm)));
    }
  } catch (const Error& e) {
    local_error = e;
  }
  const std::size_t bytes = local_error ? 0 : count * size_of(dtype);
  const Algorithm algorithm =
      local_error ? Algorithm::Auto : detail::resolve_algorithm(options.algorithm, bytes, size);
  if (config.check_args) {
    detail::check_agreement(kWhat,
                            {count, static_cast<std::int64_t>(dtype), static_cast<std::int64_t>(op),
                             static_cast<std::int64_t>(algorithm)},
                            !local_error, comm);
  }
  if (local_error) throw *local_error;
  if (count == 0) return;

  if (send != recv) std::memcpy(recv, send, bytes);
  if (size == 1) return;  // the average over one rank is the input itself

  detail::MpiTransport transport(comm.mpi_comm());
  const detail::ReduceSpec spec{size_of(dtype), detail::reduce_kernel(dtype, op)};
  switch (algorithm) {
    case Algorithm::RecursiveDoubling:
      detail::allreduce_recursive_doubling(transport, recv, count, spec);
      break;
    case Algorithm::ReduceScatterAllgather:
      detail::allreduce_rabenseifner(transport, recv, count, spec);
      break;
    case Algorithm::Ring:
    default: {
      const std::size_t segment =
          options.ring_segment_bytes != 0 ? options.ring_segment_bytes : config.ring_segment_bytes;
      detail::allreduce_ring(transport, recv, count, spec, segment);
      break;
    }
  }
  if (op == ReduceOp::Avg) detail::scale(recv, count, dtype, 1.0 / size);
}

}  // namespace concord
