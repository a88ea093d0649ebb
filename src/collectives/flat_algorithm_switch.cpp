// Dispatch to the flat (single-level, point-to-point) algorithms by name.
#include "collectives/algorithms.hpp"

namespace concord::detail {

void allreduce_flat(Algorithm algorithm, Transport& t, void* buf, std::size_t count,
                    const ReduceContext& ctx, std::size_t ring_segment_bytes) {
  switch (algorithm) {
    case Algorithm::RecursiveDoubling:
      allreduce_recursive_doubling(t, buf, count, ctx);
      return;
    case Algorithm::ReduceScatterAllgather:
      allreduce_rabenseifner(t, buf, count, ctx);
      return;
    default:
      allreduce_ring(t, buf, count, ctx, ring_segment_bytes);
      return;
  }
}

}  // namespace concord::detail
