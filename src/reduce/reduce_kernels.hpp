// Element-wise reduction kernels: one table, dtype x op, used by every algorithm.
#pragma once

#include <concord/types.hpp>

#include <cstddef>

namespace concord::detail {

// dst[i] = a[i] (op) b[i] for i < count. dst may alias a or b exactly (no partial
// overlap). Avg reduces as Sum; the single 1/size scale is applied by scale().
// Float16/BFloat16 compute in float and round to nearest-even once per call.
// Integer Sum/Prod wrap around (two's complement), never undefined behaviour.
// Min/Max: NaN if either input is NaN; -0 < +0. The result is the same bits
// whichever input is a and which is b, so every rank of a collective agrees.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, std::size_t count);

// The kernel for (dtype, op); best instruction set of this CPU, chosen once.
// Precondition: is_supported(dtype, op).
ReduceFn reduce_kernel(DataType dtype, ReduceOp op);

// buf[i] = buf[i] * factor for floating-point dtypes (rounded once for 16-bit
// types). Precondition: is_floating_point(dtype).
void scale(void* buf, std::size_t count, DataType dtype, double factor);

// The instruction set the table was built for ("avx2" or "generic"): for logs.
const char* reduce_isa();

}  // namespace concord::detail
