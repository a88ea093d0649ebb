// One process, one core: a piece of a 2-rank allreduce on shared buffers reduced from two
// inputs into two outputs, reduce-then-copy in 16 KiB chunks against one pass storing each sum
// into both, and a memcpy of the whole message for scale (bench/RESULTS.md, "One pass writing
// both outputs on shared buffers"). Prototype, not part of the build.
#include <immintrin.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
static void reduce(float* d, const float* a, const float* b, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k)
      _mm256_storeu_ps(d + i + 8 * k, _mm256_add_ps(_mm256_loadu_ps(a + i + 8 * k),
                                                    _mm256_loadu_ps(b + i + 8 * k)));
  }
  for (; i < n; ++i) d[i] = a[i] + b[i];
}
static void reduce2(float* d, float* e, const float* a, const float* b, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      __m256 s = _mm256_add_ps(_mm256_loadu_ps(a + i + 8 * k), _mm256_loadu_ps(b + i + 8 * k));
      _mm256_storeu_ps(d + i + 8 * k, s);
      _mm256_storeu_ps(e + i + 8 * k, s);
    }
  }
  for (; i < n; ++i) d[i] = e[i] = a[i] + b[i];
}
int main(int argc, char** argv) {
  size_t bytes = argc > 1 ? atol(argv[1]) : (2 << 20);
  size_t n = bytes / 4;
  auto al = [&](size_t b) {
    float* p = (float*)aligned_alloc(4096, b);
    memset(p, 1, b);
    return p;
  };
  float *a = al(bytes), *b = al(bytes), *o1 = al(bytes), *o2 = al(bytes), *src = al(2 * bytes),
        *dst = al(2 * bytes);
  const size_t chunk = 16384 / 4;
  std::vector<double> t1, t2, t3;
  for (int rep = 0; rep < 41; ++rep) {
    auto T = [&](auto f) {
      auto s = std::chrono::steady_clock::now();
      for (int k = 0; k < 20; ++k) f();
      asm volatile("" ::: "memory");
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count() / 20 * 1e6;
    };
    t1.push_back(T([&] {
      for (size_t d = 0; d < n; d += chunk) {
        size_t m = std::min(chunk, n - d);
        reduce(o1 + d, a + d, b + d, m);
        memcpy(o2 + d, o1 + d, m * 4);
      }
    }));
    t2.push_back(T([&] {
      for (size_t d = 0; d < n; d += chunk) {
        size_t m = std::min(chunk, n - d);
        reduce2(o1 + d, o2 + d, a + d, b + d, m);
      }
    }));
    t3.push_back(
        T([&] { memcpy(dst, src, 2 * bytes); }));  // roofline: copy of the whole message (2x piece)
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  printf(
      "%zu B piece: reduce+copy %.1f us, two-output reduce %.1f us, memcpy of 2x piece %.1f us; "
      "ratio %.3f\n",
      bytes, med(t1), med(t2), med(t3), med(t1) / med(t2));
}
