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
//
// Where the step across nodes comes in pieces (InterNodeStep::piece_elements)
// and can run on another thread, piece k's network step runs while this thread
// reduce-scatters piece k+1 and allgathers piece k-1, so only the first
// piece's reduce-scatter and the last one's allgather are not hidden behind
// the network (at 2 hosts x 2 ranks over 1 Gbit/s, the two phases took about
// 10 ms of 90 at 8 MiB; RESULTS.md at commit 5aa2ccf, "Hierarchical: the node's phases
// behind the network").
#include "collectives/algorithms.hpp"
#include "collectives/block_partition.hpp"
#include "collectives/shared/rounds.hpp"

#include <algorithm>
#include <future>
#include <utility>

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

std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

// The node's rounds of one message, done in order: round r takes slice r of
// every shard.
class Rounds {
 public:
  Rounds(SharedArena& node, const BlockPartition& shards, std::size_t owners, std::size_t quantum,
         const ReduceContext& ctx)
      : rounds_(node, ctx), shards_(shards), pieces_(owners) {
    slice_ = slice_elements(rounds_.region_elements(), owners, quantum);
    count_ = ceil_div(shards.largest(), slice_);
  }
  std::size_t count() const { return count_; }
  // Rounds that together hold the first `elements` of every shard...
  std::size_t covering(std::size_t elements) const { return ceil_div(elements, slice_); }
  // ... and rounds that hold nothing beyond them.
  std::size_t within(std::size_t elements) const { return elements / slice_; }

  void reduce_scatter_until(std::size_t end, const void* src, void* dst) {
    for (; scattered_ < std::min(end, count_); ++scattered_) {
      slice_pieces(shards_, scattered_, slice_, pieces_);
      rounds_.reduce_scatter(src, dst, pieces_);
    }
  }
  void allgather_until(std::size_t end, void* dst) {
    for (; gathered_ < std::min(end, count_); ++gathered_) {
      slice_pieces(shards_, gathered_, slice_, pieces_);
      rounds_.allgather(dst, pieces_);
    }
  }

 private:
  SharedRounds rounds_;
  const BlockPartition& shards_;
  std::vector<Piece> pieces_;
  std::size_t slice_ = 1;
  std::size_t count_ = 0;
  std::size_t scattered_ = 0;  // rounds done
  std::size_t gathered_ = 0;
};

// The network pieces of one message: piece k is elements [kP, (k+1)P) of every
// shard. They depend on the count, the owners and P only, so every owner of a
// shard, on every node, sends the same pieces in the same order.
struct NetworkPieces {
  const BlockPartition& shards;
  std::size_t piece_elements;  // P
  std::size_t count() const { return ceil_div(shards.largest(), piece_elements); }
  std::pair<std::size_t, std::size_t> of_shard(std::size_t k, std::size_t j) const {
    const std::size_t size = shards.size(j);
    return {std::min(size, k * piece_elements), std::min(size, (k + 1) * piece_elements)};
  }
};

// Runs piece k of `shard`'s network step: on the step's own thread where it has
// one and there is work to overlap (the future completes with it), else here.
std::future<void> send_piece(const InterNodeStep& inter_node, const NetworkPieces& pieces,
                             std::size_t k, std::size_t shard, void* dst, const ReduceContext& ctx,
                             bool overlap) {
  const auto [begin, end] = pieces.of_shard(k, shard);
  if (begin == end) return {};
  void* at = static_cast<std::byte*>(dst) + (pieces.shards.offset(shard) + begin) * ctx.elem_size;
  if (overlap && inter_node.start && pieces.count() > 1) return inter_node.start(at, end - begin);
  inter_node.allreduce(at, end - begin);
  return {};
}

// Piece by piece: piece k's network step runs while this thread reduce-scatters
// the rounds of piece k+1 and allgathers the rounds that piece k-1 completed.
// Piece k is queued before this thread waits for piece k-1, so the network
// thread goes from one piece straight to the next.
void pipelined(Rounds& rounds, const InterNodeStep& inter_node, const NetworkPieces& pieces,
               std::size_t my_shard, bool carries, const void* src, void* dst,
               const ReduceContext& ctx) {
  std::future<void> previous;  // piece k-1
  std::future<void> current;   // piece k
  // Both waited for on every way out (a future from a task does not wait when
  // destroyed); `current` first, since it runs after `previous`.
  struct Drain {
    std::future<void>& a;
    std::future<void>& b;
    ~Drain() {
      for (auto* f : {&a, &b}) {
        if (f->valid()) f->wait();
      }
    }
  } drain{current, previous};
  const std::size_t largest = pieces.shards.largest();
  for (std::size_t k = 0; k < pieces.count(); ++k) {
    rounds.reduce_scatter_until(rounds.covering(std::min(largest, (k + 1) * pieces.piece_elements)),
                                src, dst);
    if (carries) {
      ctx.exec->fence();  // the piece is complete before it leaves the node
      current = send_piece(inter_node, pieces, k, my_shard, dst, ctx, true);
      if (previous.valid()) previous.get();  // piece k-1 is home
      previous = std::move(current);
    }
    rounds.allgather_until(rounds.within(k * pieces.piece_elements), dst);
  }
  if (previous.valid()) previous.get();
  rounds.allgather_until(rounds.count(), dst);
}

}  // namespace

void allreduce_hierarchical(SharedArena* node, int shard_owners, const InterNodeStep& inter_node,
                            const void* src, void* dst, std::size_t count,
                            const ReduceContext& ctx) {
  const auto owners = static_cast<std::size_t>(shard_owners);
  // Shards and slices on 64-byte boundaries (see shared/allreduce_shared.cpp).
  const std::size_t quantum = line_quantum(ctx.elem_size);
  const BlockPartition shards(count, owners, quantum);
  const std::size_t local_rank = node != nullptr ? static_cast<std::size_t>(node->rank()) : 0;
  const bool carries = local_rank < owners && shards.size(local_rank) != 0 && inter_node.ranks > 1;
  // One network step per shard, or pieces (on whole quanta). The node's ranks
  // interleave their rounds by the pieces, so all of them, owners or not, use
  // the same pieces.
  const std::size_t piece_elements =
      std::max(quantum, inter_node.piece_elements / quantum * quantum);
  const NetworkPieces pieces{shards, inter_node.piece_elements != 0
                                         ? piece_elements
                                         : std::max<std::size_t>(shards.largest(), 1)};

  if (node == nullptr) {
    ctx.exec->copy(dst, src, count * ctx.elem_size);
    if (!carries) return;
    // No node phases to overlap: the same pieces, on this thread.
    for (std::size_t k = 0; k < pieces.count(); ++k) {
      send_piece(inter_node, pieces, k, local_rank, dst, ctx, false);
    }
    return;
  }
  Rounds rounds(*node, shards, owners, quantum, ctx);
  pipelined(rounds, inter_node, pieces, local_rank, carries, src, dst, ctx);
}

}  // namespace concord::detail
