// Where each rank's announcement records lie in the negotiation's full exchange
// (Negotiator::exchange_announcements): one MPI_Iallgatherv of bytes, whose counts
// and displacements MPI takes as int.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace concord::detail {

struct AnnouncementLayout {
  std::vector<int> counts;         // bytes, by rank
  std::vector<int> displacements;  // where each rank's bytes start
  std::size_t total = 0;
};

// The layout of every rank's `bytes` (gathered, the same on every rank), in rank
// order. Throws Error(InvalidArgument), naming the sizes, where they add up to more
// than an int can count (INT_MAX bytes): every rank throws alike, before the
// exchange, so none waits in it for the others. `rank` labels the error.
AnnouncementLayout announcement_layout(const std::vector<std::uint64_t>& bytes, int rank);

}  // namespace concord::detail
