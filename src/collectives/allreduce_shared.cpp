// Allreduce among the ranks of one node through shared memory.
//
// Small messages: each rank copies its vector into its input region and, once
// all have, reduces all of them itself (one synchronisation, p*n reads each).
// Large messages: region-sized rounds; in each, rank j reduces block j of the
// round's range straight out of the peers' regions into its result region, and
// everyone copies all result blocks out. Per rank and byte that is one copy in,
// one read per rank of its own block and one copy out, the round's data staying in
// cache between the steps; two buffers per rank overlap neighbouring rounds.
#include "collectives/algorithms.hpp"
#include "collectives/block_partition.hpp"
#include "collectives/shared_rounds.hpp"

#include <algorithm>

namespace concord::detail {

void allreduce_shared(SharedArena& node, const MessageView& src, const MessageView& dst,
                      const ReduceSpec& spec, std::size_t direct_bytes, std::size_t stream_bytes) {
  SharedRounds rounds(node, spec);
  const std::size_t capacity = rounds.region_elements();
  const std::size_t count = src.count();
  if (count * spec.elem_size <= direct_bytes && count <= capacity) {
    rounds.direct(src, dst);
    return;
  }
  rounds.stream_output(count * spec.elem_size >= stream_bytes);
  const auto ranks = static_cast<std::size_t>(node.size());
  std::vector<Piece> pieces(ranks);
  for (std::size_t offset = 0; offset < count; offset += capacity) {
    // Blocks on 64-byte boundaries: each rank's result block has its own cache
    // lines, and device kernels see equally aligned sources and destinations.
    const BlockPartition blocks(std::min(capacity, count - offset), ranks,
                                line_quantum(spec.elem_size));
    for (std::size_t j = 0; j < ranks; ++j) pieces[j] = {offset + blocks.offset(j), blocks.size(j)};
    rounds.allreduce(src, dst, pieces);
  }
}

}  // namespace concord::detail
