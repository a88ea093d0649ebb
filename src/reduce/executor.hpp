// Where an algorithm's message lives and how its bytes are copied, reduced and
// scaled: host memory with the CPU kernel table, or device memory with the CUDA
// kernels on a stream. Algorithms touch message memory only through these verbs
// and their transport, so one algorithm serves host and device buffers alike.
#pragma once

#include <cstddef>

namespace concord::detail {

class Executor {
 public:
  virtual ~Executor() = default;

  // dst[i] = a[i] op b[i] for i < count; dst may alias a or b exactly.
  virtual void reduce(void* dst, const void* a, const void* b, std::size_t count) = 0;
  // dst = ((srcs[0] op srcs[1]) op srcs[2]) ... op srcs[n-1], in that order (so
  // every caller gets the same bits as n-1 reduce() calls). n >= 1.
  virtual void reduce_many(void* dst, const void* const* srcs, std::size_t n,
                           std::size_t count) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // The same copy, for output that will not be read again soon: where the
  // executor can, it writes around the caches (non-temporal stores), so a
  // destination larger than the last-level cache is not first read into it.
  // Complete and visible when it returns, like copy().
  virtual void copy_streaming(void* dst, const void* src, std::size_t bytes) {
    copy(dst, src, bytes);
  }
  // buf[i] *= factor; floating-point dtypes only.
  virtual void scale(void* buf, std::size_t count, double factor) = 0;
  // At least `bytes` of the executor's kind of memory, 64-byte aligned, valid
  // until the next scratch() call on this executor.
  virtual std::byte* scratch(std::size_t bytes) = 0;
  // Every verb issued so far has finished and its writes are visible to other
  // processes (before a shared-memory counter tells peers). Host: nothing to do.
  virtual void fence() {}
};

}  // namespace concord::detail
