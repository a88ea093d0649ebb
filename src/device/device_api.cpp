// The public device queries of allreduce.hpp; built with and without CUDA.
#include <concord/allreduce.hpp>

#include "device/device_path.hpp"
#include "device/pointer_query.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <string>

#if CONCORD_WITH_CUDA
#include "cuda/cuda_runtime.hpp"
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

namespace detail {

void require_cuda(const char* what, int rank) {
  if (!cuda_built()) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("{}: Device::Cuda buffers need a concord built with CUDA "
                            "(CONCORD_WITH_CUDA found no nvcc when this one was configured)",
                            what));
  }
  if (!cuda_available()) {
    std::string why = "no driver or device";
#if CONCORD_WITH_CUDA
    cuda::device_count(&why);
#endif
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("{}: Device::Cuda buffers, but this process sees no CUDA device ({})",
                            what, why));
  }
}

}  // namespace detail

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
