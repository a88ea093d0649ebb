// The host's cross-core latency: two threads pinned to cores 0 and 1 hand a
// counter back and forth through two cache lines; prints the mean round trip.
// On this VM it changes from minute to minute (bench/RESULTS.md, "What the
// host's state does"), and with it every same-node allreduce.
//   c++ -O2 -pthread -o /tmp/pingpong bench/results-pair/pingpong.cpp && /tmp/pingpong
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>

namespace {

struct alignas(64) Line {
  std::atomic<std::uint64_t> value{0};
};
Line lines[2];

void pin(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

int main() {
  constexpr std::uint64_t kTrips = 200000;
  std::thread echo([] {
    pin(1);
    for (std::uint64_t i = 1; i <= kTrips; ++i) {
      while (lines[0].value.load(std::memory_order_acquire) < i) {
      }
      lines[1].value.store(i, std::memory_order_release);
    }
  });
  pin(0);
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t i = 1; i <= kTrips; ++i) {
    lines[0].value.store(i, std::memory_order_release);
    while (lines[1].value.load(std::memory_order_acquire) < i) {
    }
  }
  const auto end = std::chrono::steady_clock::now();
  echo.join();
  std::printf("cross-core round trip: %.0f ns\n",
              std::chrono::duration<double, std::nano>(end - start).count() / kTrips);
}
