// Two threads on two cores, each reducing its half of a message from two inputs and writing
// the result into two outputs (its own and the other's), the layout of concord's shared-buffer
// rounds at 2 ranks: reduce-then-copy (16 KiB chunks) against one pass storing to both.
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
static void reduce(float* d, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k)
      _mm256_storeu_ps(d + i + 8 * k, _mm256_add_ps(_mm256_loadu_ps(a + i + 8 * k),
                                                    _mm256_loadu_ps(b + i + 8 * k)));
}
static void reduce2(float* d, float* e, const float* a, const float* b, size_t n) {
  for (size_t i = 0; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k));
      _mm256_storeu_ps(d + i + 8 * k, s);
      _mm256_storeu_ps(e + i + 8 * k, s);
    }
}
int main(int argc, char** argv) {
  size_t bytes = argc > 1 ? atol(argv[1]) : (4 << 20);
  size_t n = bytes / 4, half = n / 2, chunk = 4096;
  auto al = [&](size_t b) {
    float* p = (float*)aligned_alloc(4096, b);
    memset(p, 1, b);
    return p;
  };
  float* in[2] = {al(bytes), al(bytes)};
  float* out[2] = {al(bytes), al(bytes)};
  std::atomic<int> arrived[2] = {0, 0};
  const int reps = 300;
  std::vector<double> tm[2];
  auto barrier = [&](int r, int k) {
    arrived[r].store(k);
    while (arrived[1 - r].load() < k) {
    }
  };
  auto work = [&](int r) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(r, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
    for (int it = 0; it < 4 * reps; ++it) {
      barrier(r, 2 * it + 1);
      auto t0 = std::chrono::steady_clock::now();
      size_t at = r * half;
      if (it % 2 == 0) {
        for (size_t d = 0; d < half; d += chunk) {
          size_t m = std::min(chunk, half - d);
          reduce(out[r] + at + d, in[0] + at + d, in[1] + at + d, m);
          memcpy(out[1 - r] + at + d, out[r] + at + d, m * 4);
        }
      } else {
        for (size_t d = 0; d < half; d += chunk) {
          size_t m = std::min(chunk, half - d);
          reduce2(out[r] + at + d, out[1 - r] + at + d, in[0] + at + d, in[1] + at + d, m);
        }
      }
      barrier(r, 2 * it + 2);
      if (r == 0 && it >= 2 * reps)
        tm[it % 2].push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e6);
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  printf("%zu B message, 2 threads: reduce-then-copy %.1f us, one pass %.1f us, ratio %.2f\n",
         bytes, med(tm[0]), med(tm[1]), med(tm[0]) / med(tm[1]));
}
