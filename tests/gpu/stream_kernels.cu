#include "gpu/stream_kernels.hpp"

#include "reduce/cuda_launch.cuh"

namespace concord::test {
namespace {

__global__ void delayed_fill_kernel(float* p, std::size_t n, float value,
                                    unsigned long long delay_ns) {
  if (threadIdx.x == 0) {
    const unsigned long long start = clock64();
    // clock64 counts SM cycles (about 1-2 GHz): wait at least delay_ns cycles.
    while (clock64() - start < delay_ns) {
    }
  }
  __syncthreads();
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] = value;
  }
}

__global__ void copy_kernel(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

void delayed_fill(float* p, std::size_t n, float value, unsigned long long delay_ns,
                  cudaStream_t stream) {
  CONCORD_LAUNCH(1, 256, stream, delayed_fill_kernel)(p, n, value, delay_ns);
}

void copy_floats(float* dst, const float* src, std::size_t n, cudaStream_t stream) {
  CONCORD_LAUNCH(64, 256, stream, copy_kernel)(dst, src, n);
}

}  // namespace concord::test
