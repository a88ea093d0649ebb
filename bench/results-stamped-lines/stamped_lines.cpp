// A prototype, not part of concord: is a small allreduce at 2 ranks faster when
// every cache line carries its own arrival stamp (NCCL's LL128 idea on a CPU)?
//
// Two processes (fork), pinned to cores 0 and 1, share an anonymous mapping.
// Each times, interleaved size by size, three protocols for an allreduce of n
// floats (sum), checked against the sum it computes itself:
//   counter  concord's direct path (collectives/shared_rounds.cpp): wait until
//            the peer is done with round r-2, copy in, publish "inputs ready",
//            wait for the peer's, reduce both regions, publish "done";
//   lines    the input copied into 64-byte lines of 56 payload bytes and an
//            8-byte stamp written last (release); the reader checks every
//            line's stamp (acquire), then reduces; two mailboxes by parity,
//            reused safely because a peer's letter k-1 arrives only after it
//            has read letter k-2;
//   no-done  counter without the "done" step (the same parity argument).
// Build and run (nothing else running; the rows are µs per call, rank 0):
//   g++ -O2 -std=c++20 -march=native -o /tmp/stamped_lines stamped_lines.cpp
//   /tmp/stamped_lines
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <immintrin.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr int kLineFloats = 14;  // 56 payload bytes of a 64-byte line
constexpr int kMaxFloats = 448;  // 1792 bytes: 32 lines

struct Slot {
  alignas(128) std::uint64_t counter;
  alignas(128) std::uint64_t counter_no_done;
  alignas(4096) float region[2][kMaxFloats];
  alignas(64) unsigned char mail[2][kMaxFloats / kLineFloats][64];
};

Slot* slots;
int me;
int peer;

void wait_at_least(const std::uint64_t* p, std::uint64_t v) {
  std::atomic_ref<const std::uint64_t> a(*p);
  while (a.load(std::memory_order_acquire) < v) _mm_pause();
}
void publish(std::uint64_t* p, std::uint64_t v) {
  std::atomic_ref<std::uint64_t>(*p).store(v, std::memory_order_release);
}
std::uint64_t* stamp(unsigned char* line) {
  return reinterpret_cast<std::uint64_t*>(line + 56);
}

std::uint64_t counter_rounds = 0;
void counter(const float* src, float* dst, int n) {
  const std::uint64_t r = counter_rounds++;
  if (r >= 2) wait_at_least(&slots[peer].counter, 3 * (r - 2) + 3);
  std::memcpy(slots[me].region[r % 2], src, n * sizeof(float));
  publish(&slots[me].counter, 3 * r + 1);
  wait_at_least(&slots[peer].counter, 3 * r + 1);
  const float* a = slots[0].region[r % 2];
  const float* b = slots[1].region[r % 2];
  for (int i = 0; i < n; ++i) dst[i] = a[i] + b[i];
  publish(&slots[me].counter, 3 * r + 3);
}

std::uint64_t no_done_rounds = 0;
void no_done(const float* src, float* dst, int n) {
  const std::uint64_t r = ++no_done_rounds;
  std::memcpy(slots[me].region[r % 2], src, n * sizeof(float));
  publish(&slots[me].counter_no_done, r);
  wait_at_least(&slots[peer].counter_no_done, r);
  const float* a = slots[0].region[r % 2];
  const float* b = slots[1].region[r % 2];
  for (int i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

std::uint64_t letters = 0;
void lines(const float* src, float* dst, int n) {
  const std::uint64_t k = ++letters;
  const int box = static_cast<int>(k % 2);
  const int count = (n + kLineFloats - 1) / kLineFloats;
  for (int l = 0; l < count; ++l) {
    unsigned char* line = slots[me].mail[box][l];
    std::memcpy(line, src + l * kLineFloats, std::min(kLineFloats, n - l * kLineFloats) * 4);
    publish(stamp(line), k);
  }
  for (bool all = false; !all;) {  // every stamp loaded before any branch: misses overlap
    all = true;
    for (int l = 0; l < count; ++l) {
      all &= std::atomic_ref<std::uint64_t>(*stamp(slots[peer].mail[box][l]))
                 .load(std::memory_order_acquire) >= k;
    }
    if (!all) _mm_pause();
  }
  for (int l = 0; l < count; ++l) {
    const auto* a = reinterpret_cast<const float*>(slots[0].mail[box][l]);
    const auto* b = reinterpret_cast<const float*>(slots[1].mail[box][l]);
    const int c = std::min(kLineFloats, n - l * kLineFloats);
    for (int i = 0; i < c; ++i) dst[l * kLineFloats + i] = a[i] + b[i];
  }
}

}  // namespace

int main() {
  void* mem = mmap(nullptr, 2 * sizeof(Slot) + 4096, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  slots = static_cast<Slot*>(mem);
  auto* barrier_words = reinterpret_cast<std::uint64_t*>(slots + 2);
  const pid_t child = fork();
  me = child == 0 ? 1 : 0;
  peer = 1 - me;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(me, &set);
  sched_setaffinity(0, sizeof set, &set);
  std::uint64_t barriers = 0;
  auto barrier = [&] {
    publish(&barrier_words[me * 16], ++barriers);
    wait_at_least(&barrier_words[peer * 16], barriers);
  };
  std::vector<float> src(kMaxFloats), dst(kMaxFloats);
  for (int i = 0; i < kMaxFloats; ++i) src[i] = static_cast<float>(me + i);
  using Protocol = void (*)(const float*, float*, int);
  const Protocol protocols[] = {counter, lines, no_done};
  constexpr int kCalls = 20000;
  if (me == 0)
    std::printf("bytes  counter_us  lines_us  no_done_us  counter/lines  counter/no_done\n");
  for (int rep = 0; rep < 3; ++rep) {
    for (int n : {1, 4, 16, 64, 128, 256, kMaxFloats}) {
      double us[3];
      for (int p = 0; p < 3; ++p) {
        for (int w = 0; w < 1000; ++w) protocols[p](src.data(), dst.data(), n);
        barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kCalls; ++i) protocols[p](src.data(), dst.data(), n);
        us[p] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                kCalls * 1e6;
        for (int i = 0; i < n; ++i) {
          if (dst[i] != static_cast<float>(2 * i + 1)) {
            std::printf("rank %d: protocol %d wrong at %d\n", me, p, i);
            return 1;
          }
        }
        barrier();
      }
      if (me == 0) {
        std::printf("%5d  %10.3f  %8.3f  %10.3f  %13.2f  %15.2f\n", n * 4, us[0], us[1], us[2],
                    us[0] / us[1], us[0] / us[2]);
      }
    }
  }
  if (child != 0) wait(nullptr);
  return 0;
}
