// query_pointer without CUDA: every pointer is host memory.
#include "device/pointer_query.hpp"

#include "core/config.hpp"

namespace concord::detail {

PointerInfo query_pointer(const void* ptr) {
  constexpr std::uintptr_t kHostPage = 4096;
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  return PointerInfo{Device::Cpu, -1, p & ~(kHostPage - 1), kHostPage};
}

PointerCache& pointer_cache() {
  static PointerCache cache(query_pointer, config().pointer_cache_entries);
  return cache;
}

}  // namespace concord::detail
