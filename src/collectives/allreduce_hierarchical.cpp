// Two-level allreduce: shared memory inside a node, point-to-point across nodes.
//
// The message is split into `shard_owners` contiguous shards. Within each node,
// shard j is reduce-scattered to local rank j through shared memory (in
// region-sized rounds, each round taking the same slice of every shard); local
// rank j then allreduces shard j with the local ranks j of the other nodes; and
// the node allgathers the shards. Inter-node traffic is the message once per
// node instead of once per rank, and every local rank drives one shard in
// parallel. Nodes may have different rank counts: the shard count is the
// smallest node's, and the extra ranks only contribute and receive.
#include "collectives/algorithms.hpp"
#include "collectives/block_partition.hpp"
#include "collectives/shared_rounds.hpp"

#include <algorithm>

namespace concord::detail {
namespace {

// Round `round` takes the slice [round*slice, (round+1)*slice) of every shard.
void slice_pieces(const BlockPartition& shards, std::size_t round, std::size_t slice,
                  std::vector<Piece>& pieces) {
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    const std::size_t begin = std::min(round * slice, shards.size(j));
    const std::size_t end = std::min(begin + slice, shards.size(j));
    pieces[j] = {shards.offset(j) + begin, end - begin};
  }
}

// Elements of each shard per round: the region split among the owners, whole
// quanta where the region holds one per owner.
std::size_t slice_elements(std::size_t region_elements, std::size_t owners, std::size_t quantum) {
  const std::size_t even = region_elements / owners;
  return std::max<std::size_t>(1, even >= quantum ? even / quantum * quantum : even);
}

}  // namespace

void allreduce_hierarchical(SharedArena* node, int shard_owners, const InterNodeStep& inter_node,
                            const void* src, void* dst, std::size_t count,
                            const ReduceContext& ctx) {
  const auto owners = static_cast<std::size_t>(shard_owners);
  // Shards and slices on 64-byte boundaries (see allreduce_shared.cpp).
  const std::size_t quantum = line_quantum(ctx.elem_size);
  const BlockPartition shards(count, owners, quantum);
  const std::size_t local_rank = node != nullptr ? static_cast<std::size_t>(node->rank()) : 0;

  if (node == nullptr) {
    ctx.exec->copy(dst, src, count * ctx.elem_size);
  } else {
    SharedRounds rounds(*node, ctx);
    const std::size_t slice = slice_elements(rounds.region_elements(), owners, quantum);
    const std::size_t num_rounds = (shards.largest() + slice - 1) / slice;
    std::vector<Piece> pieces(owners);
    for (std::size_t r = 0; r < num_rounds; ++r) {
      slice_pieces(shards, r, slice, pieces);
      rounds.reduce_scatter(src, dst, pieces);
    }
  }

  if (local_rank < owners && shards.size(local_rank) != 0 && inter_node.ranks > 1) {
    void* shard = static_cast<std::byte*>(dst) + shards.offset(local_rank) * ctx.elem_size;
    ctx.exec->fence();  // the shard is complete before it leaves the node
    inter_node.allreduce(shard, shards.size(local_rank));
  }

  if (node != nullptr) {
    SharedRounds rounds(*node, ctx);
    const std::size_t slice = slice_elements(rounds.region_elements(), owners, quantum);
    const std::size_t num_rounds = (shards.largest() + slice - 1) / slice;
    std::vector<Piece> pieces(owners);
    for (std::size_t r = 0; r < num_rounds; ++r) {
      slice_pieces(shards, r, slice, pieces);
      rounds.allgather(dst, pieces);
    }
  }
}

}  // namespace concord::detail
