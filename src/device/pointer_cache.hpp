// Pointer-attribute cache: which memory a pointer lies in (host, or device n), so
// that a call does not ask the CUDA driver every time (a driver query costs
// around a microsecond; Awan et al. count it among the per-call overheads that
// make small-message allreduce slow). Ranges of device allocations are cached
// whole: any pointer into a known allocation is answered from the cache.
//
// The cache cannot see cudaFree. A freed range may later be handed out again by
// the driver; device memory reused as device memory is still classified right,
// but memory whose kind changes (a freed device range reused as host memory, in
// practice only with cuMemMap-style allocators) needs forget() before the free.
// The cache is also bounded: past `capacity` ranges the least recently used go.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>

namespace concord::detail {

// What the driver says of one pointer.
struct PointerInfo {
  Device device = Device::Cpu;  // Cuda: device (or managed) memory of `ordinal`
  int ordinal = -1;
  // The range the answer holds for, [base, base + bytes): the device allocation
  // holding the pointer, or for host memory the page holding it (host pages do
  // not turn into device memory: the driver reserves device addresses apart).
  // bytes == 0: the answer holds for this pointer only and is not cached.
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
};

class PointerCache {
 public:
  using Query = std::function<PointerInfo(const void* ptr)>;

  // `query` asks the driver (or a test double); it is only called on a miss.
  PointerCache(Query query, std::size_t capacity);

  // Thread-safe. Answers from the cache when a cached range holds `ptr`, else asks
  // `query` and caches its range (if any), evicting the least recently used.
  PointerInfo lookup(const void* ptr);

  // Drops every cached range containing `ptr` (call before freeing memory whose
  // address may come back as another kind). Returns how many were dropped.
  std::size_t forget(const void* ptr);
  void clear();

  std::size_t size() const;
  std::size_t hits() const;
  std::size_t misses() const;

 private:
  struct Entry {
    PointerInfo info;
    std::list<std::uintptr_t>::iterator lru;  // position in lru_
  };
  Query query_;
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, Entry> ranges_;  // by base address
  std::list<std::uintptr_t> lru_;           // most recently used first
  std::size_t hits_ = 0;
  std::size_t misses_ = 0;
};

}  // namespace concord::detail
