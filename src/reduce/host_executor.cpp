#include "reduce/host_executor.hpp"

#include "reduce/scratch.hpp"

#include <cstring>

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

void HostExecutor::scale(void* buf, std::size_t count, double factor) {
  detail::scale(buf, count, dtype_, factor);
}

std::byte* HostExecutor::scratch(std::size_t bytes) {
  return detail::scratch(bytes);
}

}  // namespace concord::detail
