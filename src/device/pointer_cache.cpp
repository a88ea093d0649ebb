#include "device/pointer_cache.hpp"

#include <iterator>
#include <utility>

namespace concord::detail {
namespace {

// [base, base + bytes) holds p; written so that base + bytes cannot overflow.
bool holds(std::uintptr_t base, std::size_t bytes, std::uintptr_t p) {
  return p >= base && p - base < bytes;
}

}  // namespace

PointerCache::PointerCache(Query query, std::size_t capacity)
    : query_(std::move(query)), capacity_(capacity) {}

// The query runs outside the lock: a driver call must not serialise the other
// threads' hits. Two threads missing on the same range both query and the second
// insert replaces the first (the overlap rule below), so the map stays a set of
// disjoint ranges.
PointerInfo PointerCache::lookup(const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  {
    std::lock_guard lock(mutex_);
    // The last range starting at or below p is the only one that can hold it,
    // since cached ranges never overlap.
    auto it = ranges_.upper_bound(p);
    if (it != ranges_.begin()) {
      --it;
      if (holds(it->first, it->second.info.bytes, p)) {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
        ++hits_;
        return it->second.info;
      }
    }
    ++misses_;
  }

  PointerInfo info = query_(ptr);
  if (capacity_ == 0 || info.bytes == 0 || !holds(info.base, info.bytes, p)) return info;

  std::lock_guard lock(mutex_);
  // Drop whatever overlaps the new range: stale answers for memory that was freed
  // and handed out again with other bounds (or a racing thread's copy of this one).
  // Ranges are disjoint and sorted, so their ends are sorted too: walk back from
  // the first range starting at or past the new end while ranges end past its base.
  const std::uintptr_t end = info.base + info.bytes;
  auto it = ranges_.lower_bound(end);
  while (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.info.bytes <= info.base) break;
    lru_.erase(prev->second.lru);
    ranges_.erase(prev);
  }
  lru_.push_front(info.base);
  ranges_.emplace(info.base, Entry{info, lru_.begin()});
  while (ranges_.size() > capacity_) {
    ranges_.erase(lru_.back());
    lru_.pop_back();
  }
  return info;
}

std::size_t PointerCache::forget(const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mutex_);
  auto it = ranges_.upper_bound(p);
  if (it == ranges_.begin()) return 0;
  --it;
  if (!holds(it->first, it->second.info.bytes, p)) return 0;
  lru_.erase(it->second.lru);
  ranges_.erase(it);
  return 1;
}

void PointerCache::clear() {
  std::lock_guard lock(mutex_);
  ranges_.clear();
  lru_.clear();
}

std::size_t PointerCache::size() const {
  std::lock_guard lock(mutex_);
  return ranges_.size();
}

std::size_t PointerCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

std::size_t PointerCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

}  // namespace concord::detail
