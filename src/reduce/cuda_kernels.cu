// reduce, reduce_many and scale on the device (cuda_kernels.hpp): element-wise,
// memory-bound kernels. Each thread moves 16 bytes per load and store (Pack) over a
// grid-stride loop; the arithmetic is cuda_element_ops.cuh's, the same source the
// host-side unit test checks bit for bit against the host table.
//
// Alignment is checked at run time: when every pointer of a call has the same
// offset within 16 bytes, the elements before the first 16-byte boundary (the
// head) and after the last whole pack (the tail) are done one by one and the rest in
// packs; otherwise everything is done one element at a time (correct, slower; only
// for buffers offset against each other by a non-multiple of 16 bytes).
#include "reduce/cuda_kernels.hpp"

#include "cuda/cuda_runtime.hpp"
#include "reduce/cuda_element_ops.cuh"
#include "reduce/cuda_launch.cuh"
#include "reduce/cuda_packs.cuh"

#include <concord/error.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace concord::detail::cuda {

int multiprocessor_count() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  constexpr int kCached = 64;
  static std::atomic<int> cache[kCached] = {};  // 0: not queried yet
  if (device >= 0 && device < kCached) {
    if (const int known = cache[device].load(std::memory_order_relaxed)) return known;
  }
  int count = 0;
  check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
  if (device >= 0 && device < kCached) cache[device].store(count, std::memory_order_relaxed);
  return count;
}

void check_launch(const char* kernel, const std::string& what) {
  const cudaError_t result = cudaGetLastError();
  if (result == cudaSuccess) return;
  throw Error(ErrorCode::Internal, -1,
              std::string(kernel) + " (" + what + "): kernel launch failed: " +
                  cudaGetErrorName(result) + ": " + cudaGetErrorString(result));
}

namespace {

// At most this many sources per reduce_many launch (kernel parameters by value);
// more are chained through dst.
constexpr int kMaxSources = 16;

// dst[i] = op(a[i], b[i]). dst may be a or b (each element is read before it is
// written, by the same thread), so no pointer is __restrict__.
template <class Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    reduce_kernel(typename Op::value_type* dst, const typename Op::value_type* a,
                  const typename Op::value_type* b, std::size_t count, Layout layout, Op op) {
  using T = typename Op::value_type;
  constexpr int kLanes = Pack<T>::kCount;
  const std::size_t first = global_thread();
  const std::size_t stride = grid_threads();
  const std::size_t h = layout.head;
  for (std::size_t i = first; i < layout.packs; i += stride) {
    const Pack<T> x = load_pack(a + h, i);
    const Pack<T> y = load_pack(b + h, i);
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < kLanes; ++k) r.v[k] = op(x.v[k], y.v[k]);
    store_pack(dst + h, i, r);
  }
  for (std::size_t i = first; i < h; i += stride) dst[i] = op(a[i], b[i]);
  for (std::size_t i = h + layout.packs * kLanes + first; i < count; i += stride) {
    dst[i] = op(a[i], b[i]);
  }
}

template <class T>
struct Sources {
  const T* p[kMaxSources];
  int n;
};

// dst[i] = op(...op(op(src[0][i], src[1][i]), src[2][i])..., src[n-1][i]), left to
// right, rounding after every step as the pairwise calls do. dst may be src[0].
// The sources are a __grid_constant__ parameter: indexed at run time without a
// per-thread copy.
template <class Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    reduce_many_kernel(typename Op::value_type* dst,
                       const __grid_constant__ Sources<typename Op::value_type> src,
                       std::size_t count, Layout layout, Op op) {
  using T = typename Op::value_type;
  constexpr int kLanes = Pack<T>::kCount;
  const std::size_t first = global_thread();
  const std::size_t stride = grid_threads();
  const std::size_t h = layout.head;
  for (std::size_t i = first; i < layout.packs; i += stride) {
    Pack<T> acc = load_pack(src.p[0] + h, i);
    for (int s = 1; s < src.n; ++s) {
      const Pack<T> x = load_pack(src.p[s] + h, i);
#pragma unroll
      for (int k = 0; k < kLanes; ++k) acc.v[k] = op(acc.v[k], x.v[k]);
    }
    store_pack(dst + h, i, acc);
  }
  auto one = [&](std::size_t i) {
    T acc = src.p[0][i];
    for (int s = 1; s < src.n; ++s) acc = op(acc, src.p[s][i]);
    dst[i] = acc;
  };
  for (std::size_t i = first; i < h; i += stride) one(i);
  for (std::size_t i = h + layout.packs * kLanes + first; i < count; i += stride) one(i);
}

// buf[i] = op(buf[i]).
template <class Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    scale_kernel(typename Op::value_type* buf, std::size_t count, Layout layout, Op op) {
  using T = typename Op::value_type;
  constexpr int kLanes = Pack<T>::kCount;
  const std::size_t first = global_thread();
  const std::size_t stride = grid_threads();
  const std::size_t h = layout.head;
  for (std::size_t i = first; i < layout.packs; i += stride) {
    Pack<T> x = load_pack(buf + h, i);
#pragma unroll
    for (int k = 0; k < kLanes; ++k) x.v[k] = op(x.v[k]);
    store_pack(buf + h, i, x);
  }
  for (std::size_t i = first; i < h; i += stride) buf[i] = op(buf[i]);
  for (std::size_t i = h + layout.packs * kLanes + first; i < count; i += stride) {
    buf[i] = op(buf[i]);
  }
}

template <class Op>
void launch_reduce(Op op, void* dst, const void* a, const void* b, std::size_t count,
                   CudaStream stream, const std::string& what) {
  using T = typename Op::value_type;
  const std::uintptr_t d = address(dst);
  const Layout layout = layout_for<T>(d, (d ^ address(a)) | (d ^ address(b)), count);
  CONCORD_LAUNCH(grid_blocks(work_of<T>(layout, count)), kThreadsPerBlock, stream,
                 reduce_kernel<Op>)
  (static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count, layout, op);
  check_launch("reduce_kernel", what);
}

// One launch per kMaxSources sources: the first reduces srcs[0..16) into dst, each
// later one dst and the next 15 into dst, so the order stays left to right.
template <class Op>
void launch_reduce_many(Op op, void* dst, const void* const* srcs, std::size_t n, std::size_t count,
                        CudaStream stream, const std::string& what) {
  using T = typename Op::value_type;
  const std::uintptr_t d = address(dst);
  std::size_t next = 0;
  while (next < n) {
    Sources<T> sources{};
    if (next > 0) sources.p[sources.n++] = static_cast<const T*>(dst);
    std::uintptr_t mismatch = 0;
    while (sources.n < kMaxSources && next < n) {
      mismatch |= d ^ address(srcs[next]);
      sources.p[sources.n++] = static_cast<const T*>(srcs[next++]);
    }
    const Layout layout = layout_for<T>(d, mismatch, count);
    CONCORD_LAUNCH(grid_blocks(work_of<T>(layout, count)), kThreadsPerBlock, stream,
                   reduce_many_kernel<Op>)
    (static_cast<T*>(dst), sources, count, layout, op);
    check_launch("reduce_many_kernel", what);
  }
}

template <class Op>
void launch_scale(Op op, void* buf, std::size_t count, CudaStream stream, const std::string& what) {
  using T = typename Op::value_type;
  const Layout layout = layout_for<T>(address(buf), 0, count);
  CONCORD_LAUNCH(grid_blocks(work_of<T>(layout, count)), kThreadsPerBlock, stream, scale_kernel<Op>)
  (static_cast<T*>(buf), count, layout, op);
  check_launch("scale_kernel", what);
}

void check_reduce_args(const char* where, DataType dtype, ReduceOp op) {
  if (static_cast<unsigned>(dtype) > static_cast<unsigned>(DataType::Float64) ||
      static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::Avg)) {
    invalid_argument(std::string(where) + ": dtype or op out of range");
  }
  if (!is_supported(dtype, op)) {
    invalid_argument(std::string(where) + ": " + describe(dtype, op) + " is not defined");
  }
}

}  // namespace

void reduce(void* dst, const void* a, const void* b, std::size_t count, DataType dtype, ReduceOp op,
            CudaStream stream) {
  guarded("cuda::reduce", [&] {
    check_reduce_args("cuda::reduce", dtype, op);
    if (count == 0) return;
    if (dst == nullptr || a == nullptr || b == nullptr) {
      invalid_argument("cuda::reduce: null buffer with count > 0");
    }
    const std::string what = describe(dtype, op);
    ops::visit_reduce_op(dtype, op,
                         [&](auto f) { launch_reduce(f, dst, a, b, count, stream, what); });
  });
}

void reduce_many(void* dst, const void* const* srcs, std::size_t n, std::size_t count,
                 DataType dtype, ReduceOp op, CudaStream stream) {
  guarded("cuda::reduce_many", [&] {
    check_reduce_args("cuda::reduce_many", dtype, op);
    if (n == 0 || srcs == nullptr) invalid_argument("cuda::reduce_many: no sources");
    if (count == 0) return;
    if (dst == nullptr) invalid_argument("cuda::reduce_many: null dst with count > 0");
    for (std::size_t i = 0; i < n; ++i) {
      if (srcs[i] == nullptr) invalid_argument("cuda::reduce_many: null source with count > 0");
    }
    if (n == 1) {
      if (dst != srcs[0]) {
        check(cudaMemcpyAsync(dst, srcs[0], count * size_of(dtype), cudaMemcpyDefault, stream),
              "cuda::reduce_many: cudaMemcpyAsync");
      }
      return;
    }
    const std::string what = describe(dtype, op);
    ops::visit_reduce_op(dtype, op,
                         [&](auto f) { launch_reduce_many(f, dst, srcs, n, count, stream, what); });
  });
}

void scale(void* buf, std::size_t count, DataType dtype, double factor, CudaStream stream) {
  guarded("cuda::scale", [&] {
    if (!is_floating_point(dtype)) {
      invalid_argument("cuda::scale: not a floating-point dtype");
    }
    if (count == 0) return;
    if (buf == nullptr) invalid_argument("cuda::scale: null buffer with count > 0");
    const std::string what = describe(dtype);
    ops::visit_scale_op(dtype, factor, /*copy_only_ok=*/false, [&](auto f) {
      if constexpr (!std::is_same_v<decltype(f), ops::NoScale>) {
        launch_scale(f, buf, count, stream, what);
      }
    });
  });
}

}  // namespace concord::detail::cuda
