// Which parts of one rank's shared heap are in use: first fit over the free
// ranges, neighbours merged again when a range is given back. Offsets only; the
// memory itself is the arena's (transport/shm_arena.cpp). Not thread-safe: the
// arena locks around it.
#pragma once

#include <cstddef>
#include <map>
#include <optional>

namespace concord::detail {

class HeapRanges {
 public:
  // Every range starts and ends on this boundary: a page, so that a buffer
  // never shares a page (or a cache line) with another one.
  static constexpr std::size_t kGranule = 4096;

  // What take(bytes) sets aside: a whole number of granules, at least one.
  static constexpr std::size_t rounded(std::size_t bytes) {
    return bytes <= kGranule ? kGranule : (bytes + kGranule - 1) / kGranule * kGranule;
  }

  // A heap of `bytes` (rounded down to the granule), all free.
  explicit HeapRanges(std::size_t bytes);

  // The offset of a free range of at least `bytes` (rounded up to the granule,
  // at least one granule), now in use; nullopt where none is large enough.
  std::optional<std::size_t> take(std::size_t bytes);
  // The size of the range in use that starts at `offset`, now free again;
  // nullopt (and nothing changes) where no range in use starts there.
  std::optional<std::size_t> give_back(std::size_t offset);

  std::size_t capacity() const { return capacity_; }
  std::size_t free_bytes() const { return free_bytes_; }
  // The largest range take() could return now.
  std::size_t largest_free() const;

 private:
  std::size_t capacity_;
  std::size_t free_bytes_;
  std::map<std::size_t, std::size_t> free_;    // offset -> bytes, never adjacent
  std::map<std::size_t, std::size_t> in_use_;  // offset -> bytes
};

}  // namespace concord::detail
