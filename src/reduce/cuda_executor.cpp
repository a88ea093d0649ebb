#include "reduce/cuda_executor.hpp"

#include "reduce/cuda_kernels.hpp"

namespace concord::detail {

void CudaExecutor::reduce(void* dst, const void* a, const void* b, std::size_t count) {
  cuda::reduce(dst, a, b, count, dtype_, op_, stream_);
}

void CudaExecutor::reduce_many(void* dst, const void* const* srcs, std::size_t n,
                               std::size_t count) {
  cuda::reduce_many(dst, srcs, n, count, dtype_, op_, stream_);
}

void CudaExecutor::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  // cudaMemcpyDefault: either side may be device memory of any device (IPC-mapped
  // peers included) or pinned host memory; unified addressing tells which.
  cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync");
}

void CudaExecutor::scale(void* buf, std::size_t count, double factor) {
  cuda::scale(buf, count, dtype_, factor, stream_);
}

std::byte* CudaExecutor::scratch(std::size_t bytes) {
  // Growing frees the old buffer; cudaFree waits for the device, so no queued
  // kernel still reads it.
  scratch_.reserve(bytes);
  return scratch_.get();
}

void CudaExecutor::fence() {
  cuda::check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace concord::detail
