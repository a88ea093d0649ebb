// The Executor for host memory: memcpy, the CPU kernel table and per-thread scratch.
#pragma once

#include "reduce/executor.hpp"
#include "reduce/reduce_kernels.hpp"

#include <concord/types.hpp>

namespace concord::detail {

class HostExecutor final : public Executor {
 public:
  // Precondition: is_supported(dtype, op).
  HostExecutor(DataType dtype, ReduceOp op) : fn_(reduce_kernel(dtype, op)), dtype_(dtype) {}

  void reduce(void* dst, const void* a, const void* b, std::size_t count) override {
    fn_(dst, a, b, count);
  }
  void reduce_many(void* dst, const void* const* srcs, std::size_t n, std::size_t count) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void copy_streaming(void* dst, const void* src, std::size_t bytes) override;
  void scale(void* buf, std::size_t count, double factor) override;
  std::byte* scratch(std::size_t bytes) override;

 private:
  ReduceFn fn_;
  DataType dtype_;
};

}  // namespace concord::detail
