// Internal: the per-instruction-set kernel tables behind reduce_kernel() and
// scale(). reduce_kernels.cpp picks one at first use; tests use *_from() to check
// every table this CPU can run, whatever CONCORD_REDUCE_ISA says.
#pragma once

#include "reduce/reduce_kernels.hpp"

#include <concord/types.hpp>

#include <cstddef>

namespace concord::detail {

// buf[i] = buf[i] * factor; see scale().
using ScaleFn = void (*)(void* buf, std::size_t count, double factor);

inline constexpr std::size_t kNumDataTypes = 8;  // DataType::Int8 .. Float64
inline constexpr std::size_t kNumReduceOps = 5;  // ReduceOp::Sum .. Avg

struct ReduceTable {
  const char* isa;  // "generic" or "avx2"
  // Indexed by DataType, then ReduceOp; nullptr where !is_supported(dtype, op).
  ReduceFn reduce[kNumDataTypes][kNumReduceOps];
  // Indexed by DataType; nullptr for the integer types.
  ScaleFn scale[kNumDataTypes];
};

// Baseline x86-64 (or whatever the target's baseline is): runs anywhere.
const ReduceTable& generic_reduce_table() noexcept;
// AVX2 + F16C + FMA; nullptr when not built (not x86-64). Only call its kernels
// when reduce_isa_available("avx2").
const ReduceTable* avx2_reduce_table() noexcept;

// Whether the table named `isa` ("generic", "avx2") is built and this CPU runs it.
bool reduce_isa_available(const char* isa) noexcept;

// The kernel from the table named `isa`; nullptr when that table is unavailable
// (see reduce_isa_available) or (dtype, op) is unsupported / out of range.
ReduceFn reduce_kernel_from(const char* isa, DataType dtype, ReduceOp op) noexcept;
ScaleFn scale_kernel_from(const char* isa, DataType dtype) noexcept;

}  // namespace concord::detail
