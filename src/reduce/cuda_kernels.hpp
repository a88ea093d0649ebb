// CUDA reduction, scale and batched-copy kernels: the device half of the kernel
// table (reduce_kernels.hpp is the host half), with the same contract per dtype x op.
// Host-callable; each function only enqueues work on `stream` and returns. Launch
// failures throw concord::Error(Internal) naming the kernel and CUDA's message.
// Compiled only with CONCORD_WITH_CUDA.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <span>

namespace concord::detail::cuda {

// Streams are concord::CudaStream (cudaStream_t, from types.hpp). Not an alias named
// Stream here: cuda/cuda_runtime.hpp's RAII class cuda::Stream owns that name, and
// code that launches kernels includes both headers.

// dst[i] = a[i] op b[i], i < count. Same semantics, bit for bit, as the host table
// (reduce_kernels.hpp): Avg reduces as Sum; 16-bit floats computed in float and
// rounded to nearest-even once; integer Sum/Prod wrap; Min/Max return a NaN when
// either input is NaN and order -0 below +0. dst may alias a or b exactly.
void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op,
            CudaStream stream);

// dst[i] = (((srcs[0][i] op srcs[1][i]) op srcs[2][i]) ... op srcs[n-1][i]): one
// launch, reading each source once, the same bits as n-1 calls of reduce() in
// that order (16-bit floats round after every step, as the pairwise calls do).
// n >= 1 (n == 1 copies); dst may alias srcs[0] exactly.
void reduce_many(void* dst, const void* const* srcs, std::size_t n, std::size_t count,
                 DataType dtype, ReduceOp op, CudaStream stream);

// buf[i] *= factor for floating-point dtypes (the same rounding as the host
// scale(): float32 multiplies by (float)factor, 16-bit types in float and round
// once, float64 in double). Precondition: is_floating_point(dtype).
void scale(void* buf, std::size_t count, DataType dtype, double factor, CudaStream stream);

// One tensor of a batched copy: dst = factor * src, `count` elements of the
// batch's dtype. factor == 1 copies bits (any dtype); otherwise the dtype must be
// floating point. src and dst do not overlap.
struct CopyItem {
  const void* src = nullptr;
  void* dst = nullptr;
  std::size_t count = 0;
  double factor = 1.0;
};

// Every item in as few launches as the kernel-parameter space allows (items go
// by value, no descriptor upload): packs tensors into a fusion buffer and back.
void batched_copy(std::span<const CopyItem> items, DataType dtype, CudaStream stream);

}  // namespace concord::detail::cuda
