// Buffer classification with CUDA: the pointer-attribute cache, checked against
// the current GPU.
#include "cuda/cuda_runtime.hpp"
#include "device/device_path.hpp"
#include "device/pointer_query.hpp"

#include <concord/allreduce.hpp>
#include <concord/error.hpp>

#include <fmt/format.h>

namespace concord::detail {
namespace {

// The cache's answer for `ptr`; for device memory, also a check that it is on the
// current GPU: kernels run on the current device, and another GPU's memory is
// reachable only through peer access, so such buffers would fault there.
PointerInfo lookup_on_current_gpu(const void* ptr, int rank) {
  PointerInfo info = pointer_cache().lookup(ptr);
  if (info.device != Device::Cuda) return info;
  const int current = cuda::current_device();
  if (info.ordinal != current) {
    // The cache cannot see frees: the range may have been freed on one GPU and
    // handed out again on another. Ask the driver before refusing.
    pointer_cache().forget(ptr);
    info = pointer_cache().lookup(ptr);
  }
  if (info.device == Device::Cuda && info.ordinal != current) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("allreduce: the buffers are on GPU {}, but GPU {} is current on "
                            "this thread (cudaSetDevice({}) first)",
                            info.ordinal, current, info.ordinal));
  }
  return info;
}

}  // namespace

Device classify_pointer(const void* ptr, int rank) {
  if (!cuda_available()) return Device::Cpu;
  return lookup_on_current_gpu(ptr, rank).device;
}

void check_on_current_gpu(const void* ptr, int rank) {
  lookup_on_current_gpu(ptr, rank);
}

}  // namespace concord::detail
