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

#include <cstddef>
#include <utility>

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
    // Both partners compute the same elements, so they must make the same kernel
    // call: the lower rank's vector as the first operand *and* as the destination.
    // The kernels promise the same bits for either operand order except where two
    // NaNs meet, and there the payload kept is whichever operand the compiler put
    // first in that loop (it commutes a + b freely, per aliasing case and even per
    // element of the scalar tail): reduce(buf, tmp, buf) on one side against
    // reduce(buf, buf, tmp) on the other kept different payloads. So the higher
    // rank reduces into the lower's vector in tmp, and the two buffers swap roles.
    auto* cur = static_cast<std::byte*>(buf);  // this rank's running vector
    std::byte* other = tmp;                    // the partner's, received
    for (int mask = 1; mask < group.pof2(); mask <<= 1) {
      int partner = group.real_rank(group.new_rank() ^ mask);
      t.sendrecv(partner, cur, bytes, partner, other, bytes, kTagRecursiveDoubling);
      if (partner < t.rank()) {
        ctx.exec->reduce(other, other, cur, count);
        std::swap(cur, other);
      } else {
        ctx.exec->reduce(cur, cur, other, count);
      }
    }
    if (cur != buf) ctx.exec->copy(buf, cur, bytes);
  }

  if (group.folds_in()) {
    t.send(group.fold_partner(), buf, bytes, kTagRecursiveDoubling);
  } else if (group.folds_out()) {
    t.recv(group.fold_partner(), buf, bytes, kTagRecursiveDoubling);
  }
}

}  // namespace concord::detail
