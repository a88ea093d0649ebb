// Reduce-scatter + allgather (Rabenseifner): recursive halving, then recursive
// doubling, over the power-of-two group.
//
// Cost (pof2 ranks, n bytes):
//   2*log2(p)*alpha + 2*(p-1)/p * n*beta + (p-1)/p * n*gamma,
//   plus 2*(alpha + n*beta) + n*gamma for the fold when p is not a power of two.
// Bandwidth-optimal like the ring with log(p) instead of p messages: the choice
// for medium messages and for large ones on many ranks.
//
// Halving: each step a rank keeps half of its current block range, sends the other
// half to its partner and reduces the partner's copy of the kept half into its own;
// after log2(p) steps group member i owns block i. Doubling reverses the steps,
// each rank swapping what it owns with its partner straight into the result.
#include "collectives/algorithms.hpp"
#include "collectives/block_partition.hpp"
#include "collectives/power_of_two_group.hpp"

namespace concord::detail {

void allreduce_rabenseifner(Transport& t, void* buf, std::size_t count, const ReduceContext& ctx) {
  const std::size_t esize = ctx.elem_size;
  auto* data = static_cast<std::byte*>(buf);
  PowerOfTwoGroup group(t.rank(), t.size());
  // Enough for the fold (whole vector) and for the first halving step (half).
  std::byte* tmp = ctx.exec->scratch(count * esize);

  if (group.folds_out()) {
    t.send(group.fold_partner(), data, count * esize, kTagRabenseifner);
  } else if (group.folds_in()) {
    t.recv(group.fold_partner(), tmp, count * esize, kTagRabenseifner);
    ctx.exec->reduce(data, data, tmp, count);
  }

  if (group.participates()) {
    const int me = group.new_rank();
    const BlockPartition blocks(count, static_cast<std::size_t>(group.pof2()));
    std::size_t lo = 0;
    std::size_t hi = static_cast<std::size_t>(group.pof2());

    for (int mask = group.pof2() / 2; mask >= 1; mask /= 2) {
      const int partner = group.real_rank(me ^ mask);
      const std::size_t mid = lo + (hi - lo) / 2;
      const bool keep_low = (me & mask) == 0;
      const std::size_t keep_first = keep_low ? lo : mid;
      const std::size_t keep_last = keep_low ? mid : hi;
      const std::size_t send_first = keep_low ? mid : lo;
      const std::size_t send_last = keep_low ? hi : mid;
      const std::size_t keep_count = blocks.span(keep_first, keep_last);
      std::byte* keep = data + blocks.offset(keep_first) * esize;
      t.sendrecv(partner, data + blocks.offset(send_first) * esize,
                 blocks.span(send_first, send_last) * esize, partner, tmp, keep_count * esize,
                 kTagRabenseifner);
      ctx.exec->reduce(keep, keep, tmp, keep_count);
      lo = keep_first;
      hi = keep_last;
    }

    for (int mask = 1; mask < group.pof2(); mask *= 2) {
      const int partner = group.real_rank(me ^ mask);
      const std::size_t width = hi - lo;
      const bool partner_above = (me & mask) == 0;
      const std::size_t other_first = partner_above ? hi : lo - width;
      const std::size_t other_last = other_first + width;
      t.sendrecv(partner, data + blocks.offset(lo) * esize, blocks.span(lo, hi) * esize, partner,
                 data + blocks.offset(other_first) * esize,
                 blocks.span(other_first, other_last) * esize, kTagRabenseifner);
      lo = std::min(lo, other_first);
      hi = std::max(hi, other_last);
    }
  }

  if (group.folds_in()) {
    t.send(group.fold_partner(), data, count * esize, kTagRabenseifner);
  } else if (group.folds_out()) {
    t.recv(group.fold_partner(), data, count * esize, kTagRabenseifner);
  }
}

}  // namespace concord::detail
