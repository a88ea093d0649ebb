// The reduction kernels for the target's baseline instruction set (SSE2 on x86-64):
// compiled with the library's ordinary flags, runs on every CPU.
#define CONCORD_KERNEL_NS generic
#define CONCORD_HALF_ABI_NS kernels_generic
#define CONCORD_KERNEL_AVX2 0
#include "reduce/reduce_kernels_impl.hpp"

namespace concord::detail {

const ReduceTable& generic_reduce_table() noexcept {
  return generic::kTable;
}

}  // namespace concord::detail
