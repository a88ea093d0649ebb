#include "reduce/host_executor.hpp"

#include "reduce/scratch.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace concord::detail {

void HostExecutor::reduce_many(void* dst, const void* const* srcs, std::size_t n,
                               std::size_t count) {
  if (n == 1) {
    copy(dst, srcs[0], count * size_of(dtype_));
    return;
  }
  fn_(dst, srcs[0], srcs[1], count);
  for (std::size_t i = 2; i < n; ++i) fn_(dst, dst, srcs[i], count);
}

void HostExecutor::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

void HostExecutor::copy_streaming(void* dst, const void* src, std::size_t bytes) {
#if defined(__x86_64__) && defined(__SSE2__)
  // SSE2 is part of x86-64: no run-time dispatch. Head and tail with memcpy,
  // the 16-byte aligned middle with streaming stores, four per iteration.
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (bytes < 256 || dst == src) {
    copy(dst, src, bytes);
    return;
  }
  const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const std::size_t body = bytes & ~std::size_t{63};
  for (std::size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + body, s + body, bytes - body);
  // Streaming stores are weakly ordered: drain them before anyone is told.
  _mm_sfence();
#else
  copy(dst, src, bytes);
#endif
}

void HostExecutor::scale(void* buf, std::size_t count, double factor) {
  detail::scale(buf, count, dtype_, factor);
}

std::byte* HostExecutor::scratch(std::size_t bytes) {
  return detail::scratch(bytes);
}

}  // namespace concord::detail
