// Pairwise-exchange alltoallv: in step s every rank sends its block for rank
// (rank + s) and receives the block of rank (rank - s), so each pair of ranks
// meets exactly once and no rank waits for two peers at a time.
//
// Cost (p ranks): (p-1) * alpha + (bytes sent + bytes received) * beta per rank.
#include "collectives/algorithms.hpp"

#include <cstring>

namespace concord::detail {

void alltoallv_pairwise(Transport& t, const void* send, const std::vector<std::size_t>& send_bytes,
                        void* recv, const std::vector<std::size_t>& recv_bytes) {
  const int size = t.size();
  const int rank = t.rank();
  const auto offsets = [](const std::vector<std::size_t>& bytes) {
    std::vector<std::size_t> offset(bytes.size() + 1, 0);
    for (std::size_t r = 0; r < bytes.size(); ++r) offset[r + 1] = offset[r] + bytes[r];
    return offset;
  };
  const std::vector<std::size_t> send_at = offsets(send_bytes);
  const std::vector<std::size_t> recv_at = offsets(recv_bytes);
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const auto me = static_cast<std::size_t>(rank);
  if (recv_bytes[me] != 0) std::memcpy(out + recv_at[me], in + send_at[me], recv_bytes[me]);
  for (int step = 1; step < size; ++step) {
    const int dst = (rank + step) % size;
    const int src = (rank - step + size) % size;
    const auto d = static_cast<std::size_t>(dst);
    const auto s = static_cast<std::size_t>(src);
    t.sendrecv(dst, in + send_at[d], send_bytes[d], src, out + recv_at[s], recv_bytes[s],
               kTagAlltoall);
  }
}

}  // namespace concord::detail
