// Reduce-scatter + allgather (Rabenseifner): recursive halving, then recursive
// doubling, over the power-of-two group.
//
// Cost (pof2 ranks, n bytes):
//   2*log2(p)*alpha + 2*(p-1)/p * n*beta + (p-1)/p * n*gamma,
//   plus 2*(alpha + n/2*beta) + n/2*gamma for the fold when p is not a power of two.
// Bandwidth-optimal like the ring with log(p) instead of p messages: the choice
// for medium messages and for large ones on many ranks.
//
// Halving: each step a rank keeps half of its current block range, sends the other
// half to its partner and reduces the partner's copy of the kept half into its own;
// after log2(p) steps group member i owns block i. Doubling reverses the steps,
// each rank swapping what it owns with its partner straight into the result.
//
// The fold in halves (p not a power of two). Of the first 2*rem ranks, each pair
// (2i, 2i+1) is one group member whose first halving step only needs half of the
// pair's data in each rank: the odd rank the half the member keeps, the even rank
// the half it sends away. So the pair swaps halves and each reduces one: n/2 bytes
// each way where folding the whole vector into the odd rank moves n one way. In
// the first halving step the even rank sends its half away and drops out, the odd
// rank receives; in the last doubling step the even rank receives the partner's
// half, and the pair swaps halves again. Against the whole-vector fold this saves
// n*beta + n/2*gamma: at 3 ranks the critical path moves 2n instead of 3n.
#include "collectives/algorithms.hpp"
#include "collectives/block_partition.hpp"
#include "collectives/power_of_two_group.hpp"

#include <algorithm>

namespace concord::detail {
namespace {

// Blocks [first, last) of the partition over the group's members.
struct BlockRange {
  std::size_t first;
  std::size_t last;
};

class HalvingDoubling {
 public:
  HalvingDoubling(Transport& t, std::byte* data, std::size_t count, const ReduceContext& ctx)
      : t_(t),
        data_(data),
        ctx_(ctx),
        group_(t.rank(), t.size()),
        blocks_(count, static_cast<std::size_t>(group_.pof2())) {
    // The first step splits the blocks in two; every later step moves less.
    const std::size_t mid = static_cast<std::size_t>(group_.pof2()) / 2;
    const bool keep_low = (group_.member() & group_.pof2() / 2) == 0;
    keep_ = keep_low ? BlockRange{0, mid} : BlockRange{mid, 2 * mid};
    away_ = keep_low ? BlockRange{mid, 2 * mid} : BlockRange{0, mid};
    tmp_ = ctx.exec->scratch(std::max(elements(keep_), elements(away_)) * ctx.elem_size);
  }

  void run() {
    const int first_partner = group_.member() ^ (group_.pof2() / 2);
    fold_in();
    first_halving_step(first_partner);
    if (group_.participates()) inner_steps();
    last_doubling_step(first_partner);
    fold_out();
  }

 private:
  std::size_t elements(BlockRange r) const { return blocks_.span(r.first, r.last); }
  std::size_t bytes(BlockRange r) const { return elements(r) * ctx_.elem_size; }
  std::byte* at(BlockRange r) const { return data_ + blocks_.offset(r.first) * ctx_.elem_size; }
  void reduce_in(BlockRange r) { ctx_.exec->reduce(at(r), at(r), tmp_, elements(r)); }

  bool in_pair() const { return group_.folds_in() || group_.folds_out(); }
  // The half a rank of a pair holds: the odd rank keep_ (the member keeps it
  // through the first step), the even rank away_ (it sends that on).
  BlockRange pair_half() const { return group_.folds_in() ? keep_ : away_; }
  BlockRange other_pair_half() const { return group_.folds_in() ? away_ : keep_; }

  // The pair swaps halves before the first step, each reducing its own. A rank
  // outside any pair does nothing, here and in fold_out().
  void fold_in() {
    if (!in_pair()) return;
    const BlockRange mine = pair_half();
    const BlockRange theirs = other_pair_half();
    const int partner = group_.fold_partner();
    t_.sendrecv(partner, at(theirs), bytes(theirs), partner, tmp_, bytes(mine), kTagRabenseifner);
    reduce_in(mine);
  }

  // After the last step each rank of a pair holds its half of the result; they swap.
  void fold_out() {
    if (!in_pair()) return;
    const BlockRange mine = pair_half();
    const BlockRange theirs = other_pair_half();
    const int partner = group_.fold_partner();
    t_.sendrecv(partner, at(mine), bytes(mine), partner, at(theirs), bytes(theirs),
                kTagRabenseifner);
  }

  // The partner member's copy of keep_ comes from where its half lies; ours goes
  // to the rank that keeps the partner's half. A folded-out rank only sends.
  void first_halving_step(int partner) {
    if (group_.folds_out()) {
      t_.send(group_.real_rank(partner), at(away_), bytes(away_), kTagRabenseifner);
      return;
    }
    const int from = group_.half_rank(partner);
    if (group_.folds_in()) {
      t_.recv(from, tmp_, bytes(keep_), kTagRabenseifner);
    } else {
      t_.sendrecv(group_.real_rank(partner), at(away_), bytes(away_), from, tmp_, bytes(keep_),
                  kTagRabenseifner);
    }
    reduce_in(keep_);
  }

  // The mirror of the first halving step: keep_ goes to where the partner's other
  // half will lie, and the partner's keep_ (our away_) arrives from its keeper.
  void last_doubling_step(int partner) {
    if (group_.folds_out()) {
      t_.recv(group_.real_rank(partner), at(away_), bytes(away_), kTagRabenseifner);
    } else if (group_.folds_in()) {
      t_.send(group_.half_rank(partner), at(keep_), bytes(keep_), kTagRabenseifner);
    } else {
      t_.sendrecv(group_.half_rank(partner), at(keep_), bytes(keep_), group_.real_rank(partner),
                  at(away_), bytes(away_), kTagRabenseifner);
    }
  }

  // Every step but the outermost, among the group's members only.
  void inner_steps() {
    const int me = group_.new_rank();
    std::size_t lo = keep_.first;
    std::size_t hi = keep_.last;
    for (int mask = group_.pof2() / 4; mask >= 1; mask /= 2) {
      const int partner = group_.real_rank(me ^ mask);
      const std::size_t mid = lo + (hi - lo) / 2;
      const bool keep_low = (me & mask) == 0;
      const BlockRange keep = keep_low ? BlockRange{lo, mid} : BlockRange{mid, hi};
      const BlockRange away = keep_low ? BlockRange{mid, hi} : BlockRange{lo, mid};
      t_.sendrecv(partner, at(away), bytes(away), partner, tmp_, bytes(keep), kTagRabenseifner);
      reduce_in(keep);
      lo = keep.first;
      hi = keep.last;
    }
    for (int mask = 1; mask < group_.pof2() / 2; mask *= 2) {
      const int partner = group_.real_rank(me ^ mask);
      const std::size_t width = hi - lo;
      const bool partner_above = (me & mask) == 0;
      const BlockRange other =
          partner_above ? BlockRange{hi, hi + width} : BlockRange{lo - width, lo};
      t_.sendrecv(partner, at({lo, hi}), bytes({lo, hi}), partner, at(other), bytes(other),
                  kTagRabenseifner);
      lo = std::min(lo, other.first);
      hi = std::max(hi, other.last);
    }
  }

  Transport& t_;
  std::byte* data_;
  const ReduceContext& ctx_;
  PowerOfTwoGroup group_;
  BlockPartition blocks_;
  BlockRange keep_{};
  BlockRange away_{};
  std::byte* tmp_ = nullptr;
};

}  // namespace

void allreduce_rabenseifner(Transport& t, void* buf, std::size_t count, const ReduceContext& ctx) {
  // One rank: nothing to do, and the first step (partner member ^ pof2/2) would be
  // an exchange with itself.
  if (t.size() == 1) return;
  HalvingDoubling(t, static_cast<std::byte*>(buf), count, ctx).run();
}

}  // namespace concord::detail
