// The public device queries of allreduce.hpp; built with and without CUDA.
#include <concord/allreduce.hpp>

#include "device/pointer_query.hpp"

#if CONCORD_WITH_CUDA
#include "device/cuda_runtime.hpp"
#endif

namespace concord {

bool cuda_built() noexcept {
#if CONCORD_WITH_CUDA
  return true;
#else
  return false;
#endif
}

bool cuda_available() noexcept {
#if CONCORD_WITH_CUDA
  static const bool available = detail::cuda::device_count() > 0;  // never throws
  return available;
#else
  return false;
#endif
}

// pointer_cache() throws only when CONCORD_POINTER_CACHE_ENTRIES is malformed;
// the next allreduce reports that, so these stay quiet.
void forget_pointer(const void* ptr) noexcept {
  try {
    detail::pointer_cache().forget(ptr);
  } catch (...) {
  }
}

void clear_pointer_cache() noexcept {
  try {
    detail::pointer_cache().clear();
  } catch (...) {
  }
}

}  // namespace concord
