// The shared heap's bookkeeping, against a page-by-page model kept by the test.
#include <catch2/catch.hpp>

#include "collectives/shared/node_arena.hpp"
#include "transport/heap_ranges.hpp"

#include <cstddef>
#include <map>
#include <random>
#include <vector>

using concord::detail::HeapRanges;

namespace {
constexpr std::size_t kPage = HeapRanges::kGranule;
}  // namespace

TEST_CASE("heap ranges round up to pages and hand out disjoint ranges", "[heap]") {
  HeapRanges heap(10 * kPage + 100);  // the partial page is never handed out
  CHECK(heap.capacity() == 10 * kPage);
  CHECK(HeapRanges::rounded(0) == kPage);
  CHECK(HeapRanges::rounded(1) == kPage);
  CHECK(HeapRanges::rounded(kPage + 1) == 2 * kPage);
  const auto a = heap.take(1);
  const auto b = heap.take(kPage + 1);
  const auto c = heap.take(0);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(*a == 0);
  CHECK(*b == kPage);
  CHECK(*c == 3 * kPage);
  CHECK(heap.free_bytes() == 6 * kPage);
  CHECK_FALSE(heap.take(6 * kPage + 1));
  CHECK(heap.take(6 * kPage) == 4 * kPage);
  CHECK_FALSE(heap.take(1));  // full
  CHECK(heap.free_bytes() == 0);
}

TEST_CASE("heap ranges merge with their free neighbours when given back", "[heap]") {
  HeapRanges heap(8 * kPage);
  const auto a = heap.take(2 * kPage);
  const auto b = heap.take(2 * kPage);
  const auto c = heap.take(2 * kPage);
  REQUIRE((a && b && c));
  CHECK(heap.largest_free() == 2 * kPage);
  CHECK(heap.give_back(*a) == 2 * kPage);
  CHECK(heap.give_back(*c) == 2 * kPage);  // merges with the tail
  CHECK(heap.largest_free() == 4 * kPage);
  CHECK(heap.give_back(*b) == 2 * kPage);  // merges both sides: one range again
  CHECK(heap.largest_free() == 8 * kPage);
  CHECK(heap.take(8 * kPage) == 0);
}

TEST_CASE("heap ranges refuse what was never handed out or is already back", "[heap]") {
  HeapRanges heap(4 * kPage);
  const auto a = heap.take(kPage);
  REQUIRE(a);
  CHECK_FALSE(heap.give_back(*a + kPage));  // not the start of a range in use
  CHECK_FALSE(heap.give_back(*a + 8));
  CHECK(heap.give_back(*a) == kPage);
  CHECK_FALSE(heap.give_back(*a));  // twice
  CHECK(heap.free_bytes() == 4 * kPage);
  CHECK_FALSE(heap.take(std::size_t{1} << 62));  // larger than the heap: no overflow
  CHECK_FALSE(HeapRanges(0).take(1));
}

TEST_CASE("heap ranges stay disjoint and account for every page under random use", "[heap]") {
  constexpr std::size_t kPages = 64;
  HeapRanges heap(kPages * kPage);
  std::vector<int> owner(kPages, -1);       // the model: which allocation holds each page
  std::map<std::size_t, std::size_t> live;  // offset -> pages
  std::mt19937 rng(7);
  int next_id = 0;
  for (int step = 0; step < 5000; ++step) {
    if (live.empty() || rng() % 2 == 0) {
      const std::size_t pages = 1 + rng() % 6;
      // Whether a run of free pages that long exists, from the model.
      bool fits = false;
      for (std::size_t start = 0, run = 0; start < kPages && !fits; ++start) {
        run = owner[start] < 0 ? run + 1 : 0;
        fits = run >= pages;
      }
      const auto got = heap.take(pages * kPage - rng() % kPage);
      REQUIRE(got.has_value() == fits);
      if (!got) continue;
      REQUIRE(*got % kPage == 0);
      const int id = next_id++;
      for (std::size_t p = *got / kPage; p < *got / kPage + pages; ++p) {
        REQUIRE(owner[p] == -1);
        owner[p] = id;
      }
      live[*got] = pages;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      REQUIRE(heap.give_back(it->first) == it->second * kPage);
      for (std::size_t p = it->first / kPage; p < it->first / kPage + it->second; ++p)
        owner[p] = -1;
      live.erase(it);
    }
    std::size_t free_pages = 0;
    for (int o : owner) free_pages += o < 0 ? 1 : 0;
    REQUIRE(heap.free_bytes() == free_pages * kPage);
  }
}

TEST_CASE("the default heap shrinks on big nodes so that all heaps fit in 16 GiB", "[heap]") {
  using concord::detail::default_heap_bytes;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  CHECK(default_heap_bytes(1) == 512 * kMiB);
  CHECK(default_heap_bytes(2) == 512 * kMiB);
  CHECK(default_heap_bytes(32) == 512 * kMiB);
  CHECK(default_heap_bytes(64) == 256 * kMiB);
  CHECK(default_heap_bytes(96) == 170 * kMiB);  // 16 GiB / 96, down to 2 MiB steps
  CHECK(default_heap_bytes(128) == 128 * kMiB);
  CHECK(default_heap_bytes(100000) == 2 * kMiB);  // never below one step
}
