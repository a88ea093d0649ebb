#include <catch2/catch.hpp>

#include "device/pointer_cache.hpp"

#include <atomic>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

using concord::Device;
using concord::detail::PointerCache;
using concord::detail::PointerInfo;

namespace {

// A pretend driver: device allocations it knows of, everything else host memory
// (answered with its 4 KiB page, as the real query does). Addresses are never
// dereferenced. Counts how often it is asked.
class FakeAllocator {
 public:
  void allocate(std::uintptr_t base, std::size_t bytes, int ordinal) {
    std::lock_guard lock(mutex_);
    ranges_[base] = {bytes, ordinal};
  }
  void free(std::uintptr_t base) {
    std::lock_guard lock(mutex_);
    ranges_.erase(base);
  }

  PointerInfo truth(std::uintptr_t p) const {
    std::lock_guard lock(mutex_);
    auto it = ranges_.upper_bound(p);
    if (it != ranges_.begin()) {
      --it;
      if (p >= it->first && p - it->first < it->second.bytes) {
        return PointerInfo{Device::Cuda, it->second.ordinal, it->first, it->second.bytes};
      }
    }
    return PointerInfo{Device::Cpu, -1, p & ~std::uintptr_t{4095}, 4096};
  }

  PointerCache::Query query() {
    return [this](const void* ptr) {
      ++calls;
      return truth(reinterpret_cast<std::uintptr_t>(ptr));
    };
  }

  std::atomic<std::size_t> calls{0};

 private:
  struct Range {
    std::size_t bytes;
    int ordinal;
  };
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, Range> ranges_;
};

const void* at(std::uintptr_t p) {
  return reinterpret_cast<const void*>(p);
}

constexpr std::uintptr_t kA = 0x7f0000000000;  // device allocations live up here
constexpr std::uintptr_t kB = 0x7f0000100000;
constexpr std::uintptr_t kC = 0x7f0000200000;
constexpr std::size_t kMiB = 1 << 20;

}  // namespace

TEST_CASE("pointers inside a cached range are answered without a query", "[pointer_cache]") {
  FakeAllocator fake;
  fake.allocate(kA, kMiB, 1);
  PointerCache cache(fake.query(), 16);

  PointerInfo first = cache.lookup(at(kA + 10));
  CHECK(first.device == Device::Cuda);
  CHECK(first.ordinal == 1);
  CHECK(first.base == kA);
  CHECK(first.bytes == kMiB);
  CHECK(fake.calls == 1);

  for (std::uintptr_t p : {kA, kA + 4096, kA + kMiB - 1}) {
    PointerInfo info = cache.lookup(at(p));
    CHECK(info.device == Device::Cuda);
    CHECK(info.ordinal == 1);
  }
  CHECK(fake.calls == 1);
  CHECK(cache.hits() == 3);
  CHECK(cache.misses() == 1);
  CHECK(cache.size() == 1);
}

TEST_CASE("the address just past a range is not in it", "[pointer_cache]") {
  FakeAllocator fake;
  fake.allocate(kA, kMiB, 0);
  PointerCache cache(fake.query(), 16);
  cache.lookup(at(kA));

  PointerInfo past = cache.lookup(at(kA + kMiB));
  CHECK(fake.calls == 2);
  CHECK(past.device == Device::Cpu);
  CHECK(past.base == kA + kMiB);
  CHECK(past.bytes == 4096);
  CHECK(cache.misses() == 2);
  CHECK(cache.size() == 2);  // the host page is cached too
}

TEST_CASE("eviction drops the least recently used range", "[pointer_cache]") {
  FakeAllocator fake;
  fake.allocate(kA, kMiB, 0);
  fake.allocate(kB, kMiB, 0);
  fake.allocate(kC, kMiB, 0);
  PointerCache cache(fake.query(), 2);

  cache.lookup(at(kA));
  cache.lookup(at(kB));
  cache.lookup(at(kA + 1));  // touch A: B is now the oldest
  CHECK(fake.calls == 2);
  cache.lookup(at(kC));  // evicts B
  CHECK(fake.calls == 3);
  CHECK(cache.size() == 2);

  cache.lookup(at(kA + 2));
  cache.lookup(at(kC + 2));
  CHECK(fake.calls == 3);  // A and C survived
  cache.lookup(at(kB + 2));
  CHECK(fake.calls == 4);  // B was gone; now A (oldest) is
  cache.lookup(at(kC + 3));
  CHECK(fake.calls == 4);
  cache.lookup(at(kA + 3));
  CHECK(fake.calls == 5);
}

TEST_CASE("forget drops the range holding a pointer", "[pointer_cache]") {
  FakeAllocator fake;
  fake.allocate(kA, kMiB, 0);
  fake.allocate(kB, kMiB, 0);
  PointerCache cache(fake.query(), 16);
  cache.lookup(at(kA));
  cache.lookup(at(kB));

  CHECK(cache.forget(at(kA + 100)) == 1);
  CHECK(cache.forget(at(kA + 100)) == 0);
  CHECK(cache.forget(at(kC)) == 0);      // never cached
  CHECK(cache.forget(at(kA - 1)) == 0);  // below every range
  CHECK(cache.size() == 1);

  cache.lookup(at(kB + 1));
  CHECK(fake.calls == 2);
  cache.lookup(at(kA + 1));
  CHECK(fake.calls == 3);

  cache.clear();
  CHECK(cache.size() == 0);
  cache.lookup(at(kB + 1));
  CHECK(fake.calls == 4);
}

TEST_CASE("memory that changes kind is reclassified after forget", "[pointer_cache]") {
  FakeAllocator fake;
  fake.allocate(kA, kMiB, 2);
  PointerCache cache(fake.query(), 16);
  CHECK(cache.lookup(at(kA + 64)).device == Device::Cuda);

  // The allocator unmaps the range and the address comes back as host memory.
  fake.free(kA);
  // Without forget() the cache still answers from the old range: the documented
  // limit, and why forget_pointer exists.
  CHECK(cache.lookup(at(kA + 64)).device == Device::Cuda);
  CHECK(fake.calls == 1);

  CHECK(cache.forget(at(kA)) == 1);
  PointerInfo now = cache.lookup(at(kA + 64));
  CHECK(now.device == Device::Cpu);
  CHECK(now.ordinal == -1);
  CHECK(now.base == kA);
  CHECK(fake.calls == 2);
}

TEST_CASE("capacity 0 asks on every lookup", "[pointer_cache]") {
  FakeAllocator fake;
  fake.allocate(kA, kMiB, 3);
  PointerCache cache(fake.query(), 0);
  for (int i = 0; i < 5; ++i) {
    PointerInfo info = cache.lookup(at(kA + static_cast<std::uintptr_t>(i)));
    CHECK(info.device == Device::Cuda);
    CHECK(info.ordinal == 3);
  }
  CHECK(fake.calls == 5);
  CHECK(cache.size() == 0);
  CHECK(cache.hits() == 0);
  CHECK(cache.misses() == 5);
}

TEST_CASE("answers that hold for one pointer only are not cached", "[pointer_cache]") {
  std::size_t calls = 0;
  PointerCache cache(
      [&](const void*) {
        ++calls;
        return PointerInfo{Device::Cpu, -1, 0, 0};
      },
      16);
  cache.lookup(at(kA));
  cache.lookup(at(kA));
  CHECK(calls == 2);
  CHECK(cache.size() == 0);
}

TEST_CASE("a new range replaces the stale ranges it overlaps", "[pointer_cache]") {
  FakeAllocator fake;
  fake.allocate(kA, 64 * 1024, 0);
  fake.allocate(kA + 64 * 1024, 64 * 1024, 0);
  fake.allocate(kB, kMiB, 0);  // not overlapped: stays
  PointerCache cache(fake.query(), 16);
  cache.lookup(at(kA));
  cache.lookup(at(kA + 64 * 1024));
  cache.lookup(at(kB));
  CHECK(cache.size() == 3);

  // Both small allocations are freed and one larger one takes their place.
  fake.free(kA);
  fake.free(kA + 64 * 1024);
  fake.allocate(kA, 256 * 1024, 1);
  PointerInfo big = cache.lookup(at(kA + 200 * 1024));  // outside both stale ranges
  CHECK(big.ordinal == 1);
  CHECK(big.bytes == 256 * 1024);
  CHECK(cache.size() == 2);
  CHECK(fake.calls == 4);

  // The stale ranges are gone: their addresses get the new answer from the cache.
  CHECK(cache.lookup(at(kA + 10)).ordinal == 1);
  CHECK(cache.lookup(at(kA + 64 * 1024 + 10)).ordinal == 1);
  CHECK(cache.lookup(at(kB + 1)).bytes == kMiB);
  CHECK(fake.calls == 4);
}

TEST_CASE("concurrent lookups agree with the allocator and count every call", "[pointer_cache]") {
  FakeAllocator fake;
  constexpr int kRanges = 24;
  constexpr std::size_t kBytes = 64 * 1024;
  for (int r = 0; r < kRanges; ++r) {
    fake.allocate(kA + static_cast<std::uintptr_t>(r) * 2 * kBytes, kBytes, r % 4);
  }
  // Fewer entries than ranges, so threads evict each other's entries.
  PointerCache cache(fake.query(), 16);

  constexpr int kThreads = 4;
  constexpr int kLookups = 20000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(t + 1);
      for (int i = 0; i < kLookups; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        // Mostly device ranges, sometimes the host gaps between them.
        const std::uintptr_t p = kA + (state >> 20) % (2 * kBytes * kRanges);
        const PointerInfo got = cache.lookup(at(p));
        const PointerInfo want = fake.truth(p);
        if (got.device != want.device || got.ordinal != want.ordinal || got.base != want.base ||
            got.bytes != want.bytes) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  CHECK(wrong == 0);
  CHECK(cache.hits() + cache.misses() == std::size_t{kThreads} * kLookups);
  CHECK(fake.calls == cache.misses());
  CHECK(cache.size() <= 16);
  CHECK(cache.hits() > 0);
}
