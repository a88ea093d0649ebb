// query_pointer with the CUDA runtime (builds with CONCORD_WITH_CUDA).
#include "device/pointer_query.hpp"

#include "core/config.hpp"
#include "cuda/cuda_runtime.hpp"

#include <cuda.h>  // CUresult, CUdeviceptr: types only, libcuda is not linked
#include <cuda_runtime_api.h>

namespace concord::detail {
namespace {

constexpr std::uintptr_t kHostPage = 4096;

PointerInfo host_page(const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  return PointerInfo{Device::Cpu, -1, p & ~(kHostPage - 1), kHostPage};
}

// Whether this process sees a device, asked once: without one (no driver, or
// CUDA_VISIBLE_DEVICES empty) every pointer is host memory and no other CUDA
// call is made.
bool have_device() {
  static const bool have = cuda::device_count() > 0;
  return have;
}

// cuMemGetAddressRange (the 64-bit _v2 ABI of CUDA 12), fetched from the driver
// through the runtime: libconcord links only the static runtime, never libcuda,
// so it loads on machines without a driver. nullptr when the driver lacks it.
using MemGetAddressRange = CUresult (*)(CUdeviceptr* base, std::size_t* bytes, CUdeviceptr ptr);

MemGetAddressRange address_range_fn() {
  static const MemGetAddressRange fn = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t rc = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &entry, 12000,
                                                            cudaEnableDefault, &status);
    if (rc != cudaSuccess || status != cudaDriverEntryPointSuccess || entry == nullptr) {
      cudaGetLastError();
      return MemGetAddressRange{nullptr};
    }
    return reinterpret_cast<MemGetAddressRange>(entry);
  }();
  return fn;
}

}  // namespace

PointerInfo query_pointer(const void* ptr) {
  if (!have_device()) return host_page(ptr);

  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    // Not an address the runtime can classify: host memory as far as concord is
    // concerned, but the answer is not cached (bytes == 0) since it is a guess.
    cudaGetLastError();
    return PointerInfo{Device::Cpu, -1, 0, 0};
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
    // Unregistered or page-locked (cudaMemoryTypeHost) host memory alike: the host
    // paths read both.
    return host_page(ptr);
  }

  PointerInfo info{Device::Cuda, attr.device, 0, 0};
  if (MemGetAddressRange range = address_range_fn()) {
    CUdeviceptr base = 0;
    std::size_t bytes = 0;
    const auto p = reinterpret_cast<CUdeviceptr>(ptr);
    CUresult rc = range(&base, &bytes, p);
    if (rc == CUDA_ERROR_INVALID_CONTEXT) {
      // A thread that has made no CUDA call yet has no current context, which the
      // driver call needs: ask again with the allocation's device current.
      int previous = -1;
      if (cudaGetDevice(&previous) == cudaSuccess) {
        if (cudaSetDevice(attr.device) == cudaSuccess) rc = range(&base, &bytes, p);
        cudaSetDevice(previous);
      }
      cudaGetLastError();
    }
    if (rc == CUDA_SUCCESS && base <= p && p - base < bytes) {
      info.base = static_cast<std::uintptr_t>(base);
      info.bytes = bytes;
    }
    // Otherwise the answer stays uncached (bytes == 0).
  }
  return info;
}

PointerCache& pointer_cache() {
  static PointerCache cache(query_pointer, config().pointer_cache_entries);
  return cache;
}

}  // namespace concord::detail
