// allocate_shared: where a buffer comes from, what it holds on to, and the
// errors of a heap that is too small.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "core/config.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace concord;

// Whether this rank's buffers should come from a heap: more than one rank on
// the node and shared memory on (node_arena's conditions), and a heap asked for.
bool expect_heap(const Communicator& comm) {
  return comm.local_size() > 1 && detail::config().shm &&
         detail::config().shm_heap_bytes.value_or(1) > 0;
}

bool page_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 4096 == 0;
}

}  // namespace

TEST_CASE("allocate_shared gives aligned, writable buffers from the heap where there is one",
          "[shared_buffer]") {
  Communicator comm = Communicator::world();
  SharedBuffer a = allocate_shared(1000, comm);
  SharedBuffer b = allocate_shared(3 * 4096 + 1, comm);
  CHECK(a.size() == 1000);
  CHECK(b.size() == 3 * 4096 + 1);
  CHECK(a.shared() == expect_heap(comm));
  CHECK(b.shared() == a.shared());
  CHECK(page_aligned(a.data()));
  CHECK(page_aligned(b.data()));
  // Disjoint: writing one leaves the other alone.
  std::memset(a.data(), 0x11, a.size());
  std::memset(b.data(), 0x22, b.size());
  CHECK(static_cast<unsigned char*>(a.data())[a.size() - 1] == 0x11);
  CHECK(static_cast<unsigned char*>(b.data())[0] == 0x22);

  SharedBuffer empty = allocate_shared(0, comm);
  CHECK(empty.data() == nullptr);
  CHECK(empty.size() == 0);

  // Moves hand the memory over; the moved-from buffer is empty.
  void* where = a.data();
  SharedBuffer c = std::move(a);
  CHECK(c.data() == where);
  CHECK(a.data() == nullptr);  // NOLINT(bugprone-use-after-move): its defined state
  CHECK(a.size() == 0);
  CHECK_FALSE(a.shared());
  c = std::move(b);  // gives back what c held
  CHECK(c.size() == 3 * 4096 + 1);
}

// Run with CONCORD_SHM_HEAP_BYTES=4194304 (2 MiB-rounded: a 4 MiB heap per rank).
TEST_CASE("a small shared heap refuses what it cannot hold and takes back what is freed",
          "[.][shared_heap_small]") {
  Communicator comm = Communicator::world();
  if (!expect_heap(comm)) {
    FAIL("run it with 2+ ranks on one node and shared memory on: there is no heap here");
  }
  constexpr std::size_t kHeap = std::size_t{4} << 20;
  REQUIRE(detail::config().shm_heap_bytes == std::optional<std::size_t>(kHeap));
  SharedBuffer most = allocate_shared(kHeap - 4096, comm);
  CHECK(most.shared());
  SharedBuffer last = allocate_shared(4096, comm);
  CHECK(last.shared());
  try {
    (void)allocate_shared(1, comm);
    FAIL("allocate_shared should have refused a full heap");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(std::string(e.what()), Catch::Contains("CONCORD_SHM_HEAP_BYTES") &&
                                          Catch::Contains("0 of 4194304 bytes free"));
  }
  most = SharedBuffer();  // back to the heap
  SharedBuffer again = allocate_shared(kHeap - 4096, comm);
  CHECK(again.shared());
  // Larger than the whole heap: refused, with what there is.
  CHECK_THROWS_WITH(allocate_shared(kHeap + 1, comm), Catch::Contains("no free range of 4194305"));
}

// Threads allocate and free at once (the heap has one lock): buffers never
// overlap, which each thread checks by filling its own with its mark. Labelled
// `threads` (tests/CMakeLists.txt), so the TSan build runs it too.
TEST_CASE("threads allocate and free shared buffers at once", "[.][shared_heap_threads]") {
  Communicator comm = Communicator::world();
  SharedBuffer first = allocate_shared(4096, comm);  // every rank: the collective first call
  const bool heap = first.shared();
  constexpr int kThreads = 4;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<SharedBuffer> held;
      for (int i = 0; i < 200; ++i) {
        const std::size_t bytes = 1 + static_cast<std::size_t>((i * 7919 + t * 104729) % 40000);
        held.push_back(allocate_shared(bytes, comm));
        std::memset(held.back().data(), t + 1, bytes);
        if (held.size() > 8) held.erase(held.begin());  // give some back while others take
        for (const SharedBuffer& b : held) {
          const auto* p = static_cast<const unsigned char*>(b.data());
          if (p[0] != t + 1 || p[b.size() - 1] != t + 1 || b.shared() != heap) ++failures[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) CHECK(failures[t] == 0);
}
