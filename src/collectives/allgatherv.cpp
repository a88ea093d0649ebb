// Ring allgather of blocks of different sizes: p-1 steps, each rank passes on
// the block it received in the previous step.
//
// Cost (p ranks, n bytes in all): (p-1) * alpha + (p-1)/p * n * beta.
#include "collectives/algorithms.hpp"

#include <cstring>

namespace concord::detail {

void allgatherv_ring(Transport& t, const void* mine, void* out,
                     const std::vector<std::size_t>& block_bytes) {
  const int size = t.size();
  const int rank = t.rank();
  std::vector<std::size_t> offset(block_bytes.size() + 1, 0);
  for (std::size_t r = 0; r < block_bytes.size(); ++r) offset[r + 1] = offset[r] + block_bytes[r];
  auto* base = static_cast<std::byte*>(out);
  const auto me = static_cast<std::size_t>(rank);
  if (block_bytes[me] != 0 && base + offset[me] != mine) {
    std::memcpy(base + offset[me], mine, block_bytes[me]);
  }
  const int right = (rank + 1) % size;
  const int left = (rank - 1 + size) % size;
  for (int step = 0; step < size - 1; ++step) {
    const auto send_block = static_cast<std::size_t>((rank - step + size) % size);
    const auto recv_block = static_cast<std::size_t>((rank - step - 1 + size) % size);
    t.sendrecv(right, base + offset[send_block], block_bytes[send_block], left,
               base + offset[recv_block], block_bytes[recv_block], kTagAllgather);
  }
}

}  // namespace concord::detail
