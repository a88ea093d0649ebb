#include "transport/heap_ranges.hpp"

#include <algorithm>
#include <iterator>

namespace concord::detail {

HeapRanges::HeapRanges(std::size_t bytes)
    : capacity_(bytes / kGranule * kGranule), free_bytes_(capacity_) {
  if (capacity_ != 0) free_.emplace(0, capacity_);
}

std::optional<std::size_t> HeapRanges::take(std::size_t bytes) {
  if (bytes > capacity_) return std::nullopt;  // also keeps the rounding from overflowing
  const std::size_t want = rounded(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    const std::size_t offset = it->first;
    const std::size_t rest = it->second - want;
    free_.erase(it);
    if (rest != 0) free_.emplace(offset + want, rest);
    in_use_.emplace(offset, want);
    free_bytes_ -= want;
    return offset;
  }
  return std::nullopt;
}

std::optional<std::size_t> HeapRanges::give_back(std::size_t offset) {
  const auto used = in_use_.find(offset);
  if (used == in_use_.end()) return std::nullopt;
  const std::size_t bytes = used->second;
  in_use_.erase(used);
  free_bytes_ += bytes;
  std::size_t start = offset;
  std::size_t length = bytes;
  // Merge with the free range that ends where this one starts, and the one that
  // starts where it ends, so that free ranges are never adjacent.
  auto next = free_.lower_bound(offset);
  if (next != free_.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == start) {
      start = before->first;
      length += before->second;
      free_.erase(before);
    }
  }
  if (next != free_.end() && next->first == offset + bytes) {
    length += next->second;
    free_.erase(next);
  }
  free_.emplace(start, length);
  return bytes;
}

std::size_t HeapRanges::largest_free() const {
  std::size_t largest = 0;
  for (const auto& [offset, bytes] : free_) largest = std::max(largest, bytes);
  return largest;
}

}  // namespace concord::detail
