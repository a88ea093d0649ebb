// Recursive doubling allreduce.
//
// Cost (p ranks, n bytes, pof2 = largest power of two <= p):
//   log2(pof2) * (alpha + n*beta + n*gamma), plus 2 * (alpha + n*beta) when p is
//   not a power of two (the fold).
// Fewest messages of all: the choice for small messages, where alpha dominates.
//
// Non-power-of-two fold: of the first 2*rem ranks (rem = p - pof2), each even rank
// hands its vector to the odd rank above it and sits out; the remaining pof2
// ranks run the power-of-two exchange; the odd ranks then hand the result back.
#include "collectives/algorithms.hpp"
#include "collectives/power_of_two_group.hpp"

namespace concord::detail {

void allreduce_recursive_doubling(Transport& t, void* buf, std::size_t count,
                                  const ReduceContext& ctx) {
  const std::size_t bytes = count * ctx.elem_size;
  std::byte* tmp = ctx.exec->scratch(bytes);
  PowerOfTwoGroup group(t.rank(), t.size());

  if (group.folds_out()) {
    t.send(group.fold_partner(), buf, bytes, kTagRecursiveDoubling);
  } else if (group.folds_in()) {
    t.recv(group.fold_partner(), tmp, bytes, kTagRecursiveDoubling);
    ctx.exec->reduce(buf, buf, tmp, count);
  }

  if (group.participates()) {
    for (int mask = 1; mask < group.pof2(); mask <<= 1) {
      int partner = group.real_rank(group.new_rank() ^ mask);
      t.sendrecv(partner, buf, bytes, partner, tmp, bytes, kTagRecursiveDoubling);
      // The lower rank's vector first on both sides: the kernels give the same
      // bits either way except for NaN payloads, where the first operand's wins.
      if (partner < t.rank()) {
        ctx.exec->reduce(buf, tmp, buf, count);
      } else {
        ctx.exec->reduce(buf, buf, tmp, count);
      }
    }
  }

  if (group.folds_in()) {
    t.send(group.fold_partner(), buf, bytes, kTagRecursiveDoubling);
  } else if (group.folds_out()) {
    t.recv(group.fold_partner(), buf, bytes, kTagRecursiveDoubling);
  }
}

}  // namespace concord::detail
