#include "engine/announcement_layout.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <climits>
#include <string>

namespace concord::detail {
namespace {

// "rank 0: 1073741824, rank 1: 5, ..." (up to kNamed ranks, then how many more).
std::string describe_sizes(const std::vector<std::uint64_t>& bytes) {
  constexpr std::size_t kNamed = 8;
  std::string text;
  for (std::size_t r = 0; r < bytes.size() && r < kNamed; ++r) {
    text += fmt::format("{}rank {}: {}", r == 0 ? "" : ", ", r, bytes[r]);
  }
  if (bytes.size() > kNamed) text += fmt::format(" and {} more ranks", bytes.size() - kNamed);
  return text;
}

}  // namespace

AnnouncementLayout announcement_layout(const std::vector<std::uint64_t>& bytes, int rank) {
  constexpr std::uint64_t kMax = INT_MAX;
  // Each term is checked before it is added, so the sum cannot wrap either.
  std::uint64_t total = 0;
  bool fits = true;
  for (std::uint64_t b : bytes) {
    fits = fits && b <= kMax - total;
    if (fits) total += b;
  }
  if (!fits) {
    std::uint64_t sum = 0;  // for the message: 64 bits hold any real sum
    for (std::uint64_t b : bytes) sum += b;
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("Engine: this cycle's announcements of new names are {} bytes ({}), "
                            "more than the one MPI_Iallgatherv that exchanges them can count "
                            "({} bytes, MPI's int); the engine stops. Submit fewer new names "
                            "(or shorter ones) between two cycles",
                            sum, describe_sizes(bytes), kMax));
  }
  AnnouncementLayout layout;
  layout.counts.reserve(bytes.size());
  layout.displacements.reserve(bytes.size());
  int offset = 0;
  for (std::uint64_t b : bytes) {
    layout.counts.push_back(static_cast<int>(b));
    layout.displacements.push_back(offset);
    offset += static_cast<int>(b);
  }
  layout.total = static_cast<std::size_t>(total);
  return layout;
}

}  // namespace concord::detail
