// Kernels the GPU tests queue around concord's calls to check stream ordering.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace concord::test {

// Spins on the GPU for about `delay_ns`, then sets n floats at `p` to `value`:
// work that is certainly still running when the host calls concord next.
void delayed_fill(float* p, std::size_t n, float value, unsigned long long delay_ns,
                  cudaStream_t stream);
// dst = src, n floats, as a kernel (a reader queued right after the call).
void copy_floats(float* dst, const float* src, std::size_t n, cudaStream_t stream);

}  // namespace concord::test
