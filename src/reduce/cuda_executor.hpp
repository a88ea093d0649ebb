// The Executor for device memory: CUDA kernels and copies queued on one stream.
// fence() synchronises the stream, so a shared-memory counter published after it
// tells peers the data is there.
#pragma once

#include "cuda/cuda_runtime.hpp"
#include "reduce/executor.hpp"

#include <concord/types.hpp>

namespace concord::detail {

class CudaExecutor final : public Executor {
 public:
  // `scratch` is grown on demand and outlives the executor (kept per communicator).
  CudaExecutor(DataType dtype, ReduceOp op, cudaStream_t stream, cuda::DeviceBuffer& scratch)
      : dtype_(dtype), op_(op), stream_(stream), scratch_(scratch) {}

  void reduce(void* dst, const void* a, const void* b, std::size_t count) override;
  void reduce_many(void* dst, const void* const* srcs, std::size_t n, std::size_t count) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void scale(void* buf, std::size_t count, double factor) override;
  std::byte* scratch(std::size_t bytes) override;
  void fence() override;

  cudaStream_t stream() const { return stream_; }

 private:
  DataType dtype_;
  ReduceOp op_;
  cudaStream_t stream_;
  cuda::DeviceBuffer& scratch_;
};

}  // namespace concord::detail
