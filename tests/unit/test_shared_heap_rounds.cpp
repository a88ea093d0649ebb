// allreduce_shared's single-copy rounds on shared-heap buffers, with 17 ranks
// played by threads of this process over an in-process arena: a peer's buffer
// in its "heap" is reached in place (peer_view), any other is copied
// (read_peer, a memcpy here). 17 ranks go past the 16 sources SourceList keeps
// inline, and 4 MiB rounds give pieces of many 16 KiB push chunks. Results are
// checked against sums computed here. Hidden: its own ctest entry
// (unit_shared_heap_rounds, labels unit and threads) runs it, so the TSan build
// checks the rounds' memory ordering too.
#include <catch2/catch.hpp>

#include "collectives/algorithms.hpp"
#include "collectives/shared/message_view.hpp"
#include "collectives/shared/path_counts.hpp"
#include "reduce/host_executor.hpp"
#include "transport/shared_arena.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

using namespace concord;
using namespace concord::detail;

constexpr int kRanks = 17;
constexpr std::size_t kRegionBytes = 4096;

// What every rank's view shares: counters, regions, and which address ranges
// count as each rank's heap.
struct NodeMemory {
  explicit NodeMemory(int ranks)
      : counters(static_cast<std::size_t>(ranks)),
        regions(static_cast<std::size_t>(ranks) * SharedArena::kRegions * kRegionBytes),
        heaps(static_cast<std::size_t>(ranks)) {}
  std::vector<std::atomic<std::uint64_t>> counters;
  std::vector<std::byte> regions;
  struct Range {
    const std::byte* begin = nullptr;
    std::size_t bytes = 0;
  };
  std::vector<Range> heaps;
};

class ThreadArena final : public SharedArena {
 public:
  ThreadArena(NodeMemory& memory, int rank) : memory_(memory), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(memory_.counters.size()); }
  std::byte* region(int owner, int index) const override {
    return memory_.regions.data() +
           (static_cast<std::size_t>(owner) * kRegions + static_cast<std::size_t>(index)) *
               kRegionBytes;
  }
  std::size_t region_bytes() const override { return kRegionBytes; }
  void publish(std::uint64_t value) override {
    memory_.counters[static_cast<std::size_t>(rank_)].store(value, std::memory_order_release);
  }
  std::uint64_t published() const override {
    return memory_.counters[static_cast<std::size_t>(rank_)].load(std::memory_order_relaxed);
  }
  void wait_for(int peer, std::uint64_t value) const override {
    while (memory_.counters[static_cast<std::size_t>(peer)].load(std::memory_order_acquire) <
           value) {
      std::this_thread::yield();
    }
  }
  bool wait_before(int peer, std::uint64_t value,
                   std::chrono::steady_clock::time_point deadline) const override {
    while (memory_.counters[static_cast<std::size_t>(peer)].load(std::memory_order_acquire) <
           value) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  bool can_read_peer() const override { return true; }
  void read_peer(int, void* to, const void* from, std::size_t bytes) const override {
    std::memcpy(to, from, bytes);
  }
  std::byte* peer_view(int peer, const void* from, std::size_t bytes) const override {
    const NodeMemory::Range& heap = memory_.heaps[static_cast<std::size_t>(peer)];
    const auto* p = static_cast<const std::byte*>(from);
    if (p < heap.begin || p + bytes > heap.begin + heap.bytes) return nullptr;
    return const_cast<std::byte*>(p);
  }

 private:
  NodeMemory& memory_;
  int rank_;
};

float input(int rank, std::size_t i) {
  return static_cast<float>((static_cast<std::size_t>(rank) * 7 + i) % 13);
}

// One allreduce over kRanks threads; ranks where `in_heap(rank)` keep their
// buffers in their heap. Returns the elements that differ from the sums.
std::size_t run_node(std::size_t count, bool in_place, bool streamed, bool (*in_heap)(int)) {
  NodeMemory memory(kRanks);
  // Per rank: input then output, contiguous; the heap range covers both.
  std::vector<std::vector<float>> buffers(kRanks, std::vector<float>(2 * count));
  for (int r = 0; r < kRanks; ++r) {
    auto& b = buffers[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < count; ++i) b[i] = input(r, i);
    std::fill(b.begin() + static_cast<std::ptrdiff_t>(count), b.end(), -1.0f);
    if (in_heap(r)) {
      memory.heaps[static_cast<std::size_t>(r)] = {reinterpret_cast<const std::byte*>(b.data()),
                                                   b.size() * sizeof(float)};
    }
  }
  SharedLimits limits;
  limits.direct_bytes = 0;
  limits.single_copy_bytes = 0;
  limits.single_copy_round_bytes = std::size_t{4} << 20;
  limits.stream_bytes = streamed ? 0 : SIZE_MAX;
  limits.measure_single_copy = false;
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ThreadArena arena(memory, r);
      HostExecutor exec(DataType::Float32, ReduceOp::Sum);
      float* src = buffers[static_cast<std::size_t>(r)].data();
      float* dst = in_place ? src : src + count;
      allreduce_shared(arena, MessageView(src, count, sizeof(float)),
                       MessageView(dst, count, sizeof(float)),
                       ReduceContext{sizeof(float), DataType::Float32, &exec}, limits);
    });
  }
  for (std::thread& t : threads) t.join();
  std::size_t wrong = 0;
  for (int r = 0; r < kRanks; ++r) {
    const float* dst = buffers[static_cast<std::size_t>(r)].data() + (in_place ? 0 : count);
    for (std::size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int q = 0; q < kRanks; ++q) sum += input(q, i);
      if (dst[i] != sum) ++wrong;
    }
  }
  return wrong;
}

// One allreduce of a scattered message in place: each of `ranks` threads has its
// own tensors of the sizes in `counts` (so every rank's lie elsewhere), the i-th
// scaled by scales[i % scales.size()] on the way out. Returns the elements that
// differ from the scaled sums.
std::size_t run_scattered(int ranks, const std::vector<std::size_t>& counts,
                          const std::vector<double>& scales, std::size_t round_bytes) {
  NodeMemory memory(ranks);
  std::vector<std::vector<std::vector<float>>> tensors(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    std::size_t global = 0;
    for (std::size_t count : counts) {
      std::vector<float>& t = tensors[static_cast<std::size_t>(r)].emplace_back(count);
      for (std::size_t i = 0; i < count; ++i) t[i] = input(r, global + i);
      global += count;
    }
  }
  SharedLimits limits;
  limits.direct_bytes = 0;
  limits.single_copy_bytes = 0;
  limits.single_copy_round_bytes = round_bytes;
  limits.stream_bytes = SIZE_MAX;
  limits.measure_single_copy = false;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      ThreadArena arena(memory, r);
      HostExecutor exec(DataType::Float32, ReduceOp::Sum);
      std::vector<TensorSpan> spans;
      for (std::size_t t = 0; t < counts.size(); ++t) {
        spans.push_back(
            {reinterpret_cast<std::byte*>(tensors[static_cast<std::size_t>(r)][t].data()),
             counts[t], scales[t % scales.size()]});
      }
      const MessageView view(std::move(spans), sizeof(float));
      allreduce_shared(arena, view, view, ReduceContext{sizeof(float), DataType::Float32, &exec},
                       limits);
    });
  }
  for (std::thread& t : threads) t.join();
  std::size_t wrong = 0;
  for (int r = 0; r < ranks; ++r) {
    std::size_t global = 0;
    for (std::size_t t = 0; t < counts.size(); ++t) {
      const std::vector<float>& out = tensors[static_cast<std::size_t>(r)][t];
      for (std::size_t i = 0; i < counts[t]; ++i) {
        float sum = 0;
        for (int q = 0; q < ranks; ++q) sum += input(q, global + i);
        if (out[i] != sum * static_cast<float>(scales[t % scales.size()])) ++wrong;
      }
      global += counts[t];
    }
  }
  return wrong;
}

bool every_rank(int) {
  return true;
}
bool even_ranks(int rank) {
  return rank % 2 == 0;
}
bool no_rank(int) {
  return false;
}

}  // namespace

TEST_CASE("single-copy rounds on shared buffers at 17 ranks, pieces of many push chunks",
          "[.][shared_heap_rounds]") {
  // A round of 4 MiB and a partial one: pieces of about 60,000 floats.
  const std::size_t count = (std::size_t{1} << 20) + 12345;
  for (bool in_place : {false, true}) {
    INFO("in_place=" << in_place);
    CHECK(run_node(count, in_place, false, every_rank) == 0);
    CHECK(run_node(count, in_place, true, every_rank) == 0);   // pushes streamed
    CHECK(run_node(count, in_place, false, even_ranks) == 0);  // mixed
    CHECK(run_node(count, in_place, false, no_rank) == 0);     // all copied
  }
}

TEST_CASE("single-copy rounds on a scattered message reduced in place, scaled per tensor",
          "[.][shared_heap_rounds]") {
  // Tensors of odd sizes (one element, several rounds' worth), so pieces and rounds
  // start and end inside tensors and runs cross from one tensor to the next. Scales
  // are powers of two: the expected values are exact.
  const std::vector<std::size_t> counts = {1, 1000, 70001, 3, 250000, 12345, 64, 4097};
  const std::vector<double> scales = {1.0, 0.5, 0.25};
  const auto copied_before = peer_access_count(PeerAccess::InputCopied);
  const auto fetched_before = peer_access_count(PeerAccess::ResultFetchedCopied);
  for (int ranks : {2, 3, kRanks}) {
    INFO("ranks=" << ranks);
    CHECK(run_scattered(ranks, counts, scales, std::size_t{64} << 10) == 0);  // many rounds
    CHECK(run_scattered(ranks, counts, {1.0}, std::size_t{4} << 20) == 0);    // one round
  }
  // The scattered single-copy rounds ran: peers' inputs read into the bounce buffer
  // and results fetched from their owners' tensors.
  CHECK(peer_access_count(PeerAccess::InputCopied) > copied_before);
  CHECK(peer_access_count(PeerAccess::ResultFetchedCopied) > fetched_before);
}
