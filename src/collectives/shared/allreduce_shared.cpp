// Allreduce among the ranks of one node through shared memory.
//
// Small messages: each rank copies its vector into its input region and, once
// all have, reduces all of them itself (one synchronisation, p*n reads each).
// Large messages: region-sized rounds; in each, rank j reduces block j of the
// round's range straight out of the peers' regions into its result region, and
// everyone copies all result blocks out. Per rank and byte that is one copy in,
// one read per rank of its own block and one copy out, the round's data staying in
// cache between the steps; two buffers per rank overlap neighbouring rounds.
// With single-copy reads (SharedArena::read_peer) large messages skip the copy
// in and the copy out through the arena: see SharedRounds::allreduce_single_copy.
#include "collectives/algorithms.hpp"
#include "collectives/block_partition.hpp"
#include "collectives/shared/path_choice.hpp"
#include "collectives/shared/path_counts.hpp"
#include "collectives/shared/rounds.hpp"

#include <algorithm>
#include <chrono>

namespace concord::detail {

namespace {

// Single copy takes one contiguous, unscaled buffer each for src and dst, or a
// scattered message reduced in place (a fusion bucket's tensors where they lie).
bool contiguous(const MessageView& src, const MessageView& dst) {
  return src.contiguous_data() != nullptr && dst.contiguous_data() != nullptr && !dst.scaled();
}
bool scattered_in_place(const MessageView& src, const MessageView& dst) {
  return &src == &dst && !src.is_single_buffer();
}

bool use_single_copy(const SharedArena& node, const MessageView& src, const MessageView& dst,
                     std::size_t bytes, const SharedLimits& limits) {
  return node.can_read_peer() && bytes >= limits.single_copy_bytes &&
         (contiguous(src, dst) || scattered_in_place(src, dst));
}

}  // namespace

void allreduce_shared(SharedArena& node, const MessageView& src, const MessageView& dst,
                      const ReduceContext& ctx, const SharedLimits& limits) {
  SharedRounds rounds(node, ctx);
  std::size_t capacity = rounds.region_elements();
  const std::size_t count = src.count();
  const std::size_t bytes = count * ctx.elem_size;
  if (bytes <= limits.direct_bytes && count <= capacity) {
    rounds.direct(src, dst);
    return;
  }
  // Where single copy is possible, measure which path is faster (shared/path_choice.hpp).
  PathPlan plan{false};
  if (use_single_copy(node, src, dst, bytes, limits)) {
    plan = plan_large_path(node, bytes, limits.measure_single_copy);
  }
  const bool single_copy = plan.single_copy;
  const bool scattered = single_copy && !contiguous(src, dst);  // decided once, not per round
  const auto started = std::chrono::steady_clock::now();
  // Single-copy rounds hold no data in the arena: their size only bounds the
  // bounce buffer ((p-1)/p of a round) and sets how often ranks synchronise.
  if (single_copy) capacity = std::max(capacity, limits.single_copy_round_bytes / ctx.elem_size);
  const bool stream = bytes >= limits.stream_bytes;
  rounds.stream_output(stream);
  count_shm_path(single_copy ? ShmPath::SingleCopy : ShmPath::CopyRounds);
  if (stream) count_shm_path(ShmPath::StreamedOutput);
  const auto ranks = static_cast<std::size_t>(node.size());
  std::vector<Piece> pieces(ranks);
  for (std::size_t offset = 0; offset < count; offset += capacity) {
    // Blocks on 64-byte boundaries: each rank's result block has its own cache
    // lines, and device kernels see equally aligned sources and destinations.
    const BlockPartition blocks(std::min(capacity, count - offset), ranks,
                                line_quantum(ctx.elem_size));
    for (std::size_t j = 0; j < ranks; ++j) pieces[j] = {offset + blocks.offset(j), blocks.size(j)};
    if (scattered) {
      rounds.allreduce_single_copy_scattered(src, pieces);
    } else if (single_copy) {
      rounds.allreduce_single_copy(src.contiguous_data(), dst.contiguous_data(), pieces);
    } else {
      rounds.allreduce(src, dst, pieces);
    }
  }
  if (single_copy) rounds.finish_single_copy();
  record_large_path(
      node, plan,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

}  // namespace concord::detail
