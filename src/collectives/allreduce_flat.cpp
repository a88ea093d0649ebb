// Dispatch to the flat (single-level, point-to-point) algorithms by name.
#include "collectives/algorithms.hpp"

namespace concord::detail {

void allreduce_flat(Algorithm algorithm, Transport& t, void* buf, std::size_t count,
                    const ReduceSpec& spec, std::size_t ring_segment_bytes) {
  switch (algorithm) {
    case Algorithm::RecursiveDoubling:
      allreduce_recursive_doubling(t, buf, count, spec);
      return;
    case Algorithm::ReduceScatterAllgather:
      allreduce_rabenseifner(t, buf, count, spec);
      return;
    default:
      allreduce_ring(t, buf, count, spec, ring_segment_bytes);
      return;
  }
}

}  // namespace concord::detail
