// Binomial-tree broadcast: ceil(log2(p)) steps, each rank receives once from
// its parent and forwards to its children, nearest-in-rank first.
//
// Cost (p ranks, n bytes): log2(p) * (alpha + n*beta). Fine for the engine's
// broadcasts (initial weights, once per job); a pipelined scatter+allgather
// would only pay off for very large messages on many ranks.
#include "collectives/algorithms.hpp"

namespace concord::detail {

void broadcast_binomial(Transport& t, void* buf, std::size_t bytes, int root) {
  const int size = t.size();
  const int relative = (t.rank() - root + size) % size;
  int mask = 1;
  // Receive from the parent: the rank that differs in the lowest set bit.
  while (mask < size) {
    if ((relative & mask) != 0) {
      const int parent = (relative - mask + root) % size;
      t.recv(parent, buf, bytes, kTagBroadcast);
      break;
    }
    mask <<= 1;
  }
  // Forward to the children below that bit.
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (relative + mask < size) {
      const int child = (relative + mask + root) % size;
      t.send(child, buf, bytes, kTagBroadcast);
    }
  }
}

}  // namespace concord::detail
