// The reduction kernels for AVX2 + F16C + FMA. On x86-64 the build compiles this
// file with -mavx2 -mf16c -mfma; reduce_kernels.cpp only calls into it after
// checking the CPU. Elsewhere it only defines avx2_reduce_table() returning nullptr.
#if defined(__x86_64__)

#if !defined(__AVX2__) || !defined(__F16C__) || !defined(__FMA__)
#error "reduce_kernels_avx2.cpp must be compiled with -mavx2 -mf16c -mfma"
#endif

#define CONCORD_KERNEL_NS avx2
#define CONCORD_HALF_ABI_NS kernels_avx2
#define CONCORD_KERNEL_AVX2 1
#include "reduce/reduce_kernels_impl.hpp"

namespace concord::detail {

const ReduceTable* avx2_reduce_table() noexcept {
  return &avx2::kTable;
}

}  // namespace concord::detail

#else  // not x86-64: no AVX2 table

#include "reduce/reduce_tables.hpp"

namespace concord::detail {

const ReduceTable* avx2_reduce_table() noexcept {
  return nullptr;
}

}  // namespace concord::detail

#endif
