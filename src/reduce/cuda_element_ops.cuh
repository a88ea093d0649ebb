// The per-element operations of the CUDA kernels (cuda_kernels.cu,
// cuda_batched_copy.cu), one functor per dtype x op and per floating-point scale,
// written so that this same header compiles with nvcc (host and device) and with a
// plain C++ compiler: tests/unit/test_cuda_element_ops.cpp checks every functor bit
// for bit against the host table (reduce_kernels_impl.hpp) on a machine without a
// GPU. The dispatch from (DataType, ReduceOp) to a functor is here too, in one
// place, so the test exercises the same mapping the kernels use.
//
// Bit-exact with the host, including NaNs. A GPU's float/double add and multiply
// return the canonical NaN (0x7fffffff) whatever NaN came in; a CPU returns the
// first NaN operand, made quiet (x86-64; AArch64 prefers a signalling one), or its
// "default" NaN when the operation itself is invalid (inf - inf, 0 * inf: x86-64
// gives the negative 0xffc00000). host_nan() rebuilds the CPU's answer from the
// operands with selects, so no hardware NaN ever reaches a result. One case cannot
// match: when BOTH operands of an add or multiply are NaN, the host returns either
// one depending on its code path (the compiler orders a commutative operation's
// operands as it likes; the host tables' vector body and scalar tail disagree), so
// the functors always return x's, quiet, and the tests accept either. The arithmetic
// itself is IEEE round-to-nearest-even on both sides (device code uses __fadd_rn
// and friends, which the compiler never contracts into FMAs, and nvcc keeps float
// subnormals unless built with -ftz=true or --use_fast_math, which must not be used).
//
// Float16 on the device widens and narrows with the hardware conversions (one
// instruction each; the portable ones in half.hpp cost ~15 integer instructions
// and would make the kernel compute-bound on H100-class memory). They agree with
// half.hpp on every non-NaN value: widening is exact, and narrowing is IEEE
// round-to-nearest-even (incl. subnormal results and overflow to inf), which has a
// single answer. NaN results never come from them: they are selected from the
// operands' bits (see finish16). BFloat16 uses half.hpp's functions on both
// sides (widening is a shift; narrowing is a few integer operations).
#pragma once

#if defined(__CUDACC__)
#define CONCORD_HD __host__ __device__
#else
#define CONCORD_HD
#endif

// half.hpp's inline functions get this TU family's own mangled names (see half.hpp).
#ifndef CONCORD_HALF_ABI_NS
#define CONCORD_HALF_ABI_NS cuda_abi
#endif
#include "reduce/half.hpp"

#include <concord/types.hpp>

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace concord::detail::cuda::ops {

// ---- the host CPU's NaN rules --------------------------------------------------

#if defined(__x86_64__) || defined(__i386__)
// SSE/AVX: the first operand that is a NaN (quiet or signalling), made quiet.
inline constexpr bool kSignallingNaNFirst = false;
inline constexpr std::uint32_t kDefaultNaN32 = 0xffc00000u;  // "QNaN floating-point indefinite"
inline constexpr std::uint64_t kDefaultNaN64 = 0xfff8000000000000u;
#elif defined(__aarch64__) || defined(__arm__)
// FPCR.DN = 0: the first signalling NaN operand, made quiet, else the first quiet one.
inline constexpr bool kSignallingNaNFirst = true;
inline constexpr std::uint32_t kDefaultNaN32 = 0x7fc00000u;
inline constexpr std::uint64_t kDefaultNaN64 = 0x7ff8000000000000u;
#else
#error "cuda_element_ops.cuh: describe this CPU's NaN propagation (see x86-64 and AArch64)"
#endif

template <class F>
struct FloatBits;
template <>
struct FloatBits<float> {
  using Bits = std::uint32_t;
  static constexpr Bits kQuiet = 0x00400000u;
  static constexpr Bits kDefaultNaN = kDefaultNaN32;
  CONCORD_HD static Bits to_bits(float f) { return float_bits(f); }
  CONCORD_HD static float from_bits(Bits u) { return float_from_bits(u); }
};
template <>
struct FloatBits<double> {
  using Bits = std::uint64_t;
  static constexpr Bits kQuiet = 0x0008000000000000u;
  static constexpr Bits kDefaultNaN = kDefaultNaN64;
  CONCORD_HD static Bits to_bits(double d) { return double_bits(d); }
  CONCORD_HD static double from_bits(Bits u) { return double_from_bits(u); }
};

// IEEE add and multiply, rounded to nearest even; on the device never fused.
CONCORD_HD inline float add_rn(float x, float y) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(x, y);
#else
  return x + y;
#endif
}
CONCORD_HD inline float mul_rn(float x, float y) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(x, y);
#else
  return x * y;
#endif
}
CONCORD_HD inline double add_rn(double x, double y) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(x, y);
#else
  return x + y;
#endif
}
CONCORD_HD inline double mul_rn(double x, double y) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(x, y);
#else
  return x * y;
#endif
}

// r = x op y as the host CPU returns it: r itself when it is a number; otherwise the
// NaN operand the CPU propagates (made quiet), or the CPU's default NaN.
template <class F>
CONCORD_HD F host_nan(F r, F x, F y) {
  using B = FloatBits<F>;
  using Bits = typename B::Bits;
  const Bits bx = B::to_bits(x);
  const Bits by = B::to_bits(y);
  const bool x_nan = x != x;
  const bool y_nan = y != y;
  Bits out = (r != r) ? B::kDefaultNaN : B::to_bits(r);
  out = y_nan ? (by | B::kQuiet) : out;
  out = x_nan ? (bx | B::kQuiet) : out;
  if constexpr (kSignallingNaNFirst) {
    out = (y_nan && (by & B::kQuiet) == 0) ? (by | B::kQuiet) : out;
    out = (x_nan && (bx & B::kQuiet) == 0) ? (bx | B::kQuiet) : out;
  }
  return B::from_bits(out);
}

// ---- integers: Sum and Prod wrap (in the unsigned type) ---------------------------

template <class T>
struct IntSum {
  using value_type = T;
  CONCORD_HD T operator()(T x, T y) const {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  }
};
template <class T>
struct IntProd {
  using value_type = T;
  CONCORD_HD T operator()(T x, T y) const {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
  }
};
template <class T>
struct IntMin {
  using value_type = T;
  CONCORD_HD T operator()(T x, T y) const { return y < x ? y : x; }
};
template <class T>
struct IntMax {
  using value_type = T;
  CONCORD_HD T operator()(T x, T y) const { return x < y ? y : x; }
};

// ---- float / double -------------------------------------------------------------

template <class F>
struct FloatSum {
  using value_type = F;
  CONCORD_HD F operator()(F x, F y) const { return host_nan(add_rn(x, y), x, y); }
};
template <class F>
struct FloatProd {
  using value_type = F;
  CONCORD_HD F operator()(F x, F y) const { return host_nan(mul_rn(x, y), x, y); }
};

// As the host: a NaN input gives that NaN made quiet (x's when both are); otherwise
// the smaller/larger value, with -0 < +0 (equal numbers differ in bits only as
// +0/-0, so x | y for min and x & y for max pick the right zero). Only comparisons
// and bit operations: identical on any hardware.
template <class F, bool kMax>
struct FloatMinMax {
  using value_type = F;
  CONCORD_HD F operator()(F x, F y) const {
    using B = FloatBits<F>;
    using Bits = typename B::Bits;
    const Bits bx = B::to_bits(x);
    const Bits by = B::to_bits(y);
    const bool x_wins = kMax ? (y < x) : (x < y);
    const bool y_wins = kMax ? (x < y) : (y < x);
    Bits r = kMax ? (bx & by) : (bx | by);
    r = x_wins ? bx : r;
    r = y_wins ? by : r;
    r = (y != y) ? (by | B::kQuiet) : r;
    r = (x != x) ? (bx | B::kQuiet) : r;
    return B::from_bits(r);
  }
};

// ---- Float16 / BFloat16 ---------------------------------------------------------

// A 16-bit format: widen (exact for every non-NaN value), narrow a non-NaN float
// (round to nearest even), the NaN bit patterns, and `finish`, which turns the
// float result r = x op y back into 16 bits as the host does: narrow(r) for a
// number, otherwise the host's NaN computed from the 16-bit operands.
struct Half16 {
  static constexpr std::uint16_t kQuiet = 0x0200u;
  static constexpr std::uint16_t kInf = 0x7c00u;
  // Widening makes every NaN quiet, so the host's float operation always sees quiet
  // NaNs and returns the first one.
  static constexpr bool kWidenQuiets = true;
  static constexpr std::uint16_t kDefaultNaN = float_to_half(float_from_bits(kDefaultNaN32));

  CONCORD_HD static float widen(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(h));
#else
    return half_to_float(h);
#endif
  }
  CONCORD_HD static std::uint16_t narrow(float f) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(f));
#else
    return float_to_half(f);
#endif
  }
  // Any float, NaN included (half.hpp's NaN rule): for host-side set-up only.
  static constexpr std::uint16_t narrow_any(float f) {
    return float_to_half(f);
  }
};

struct BFloat16_16 {
  static constexpr std::uint16_t kQuiet = 0x0040u;
  static constexpr std::uint16_t kInf = 0x7f80u;
  // A bfloat16 is the top half of a float: a signalling NaN stays signalling.
  static constexpr bool kWidenQuiets = false;
  static constexpr std::uint16_t kDefaultNaN = float_to_bfloat16(float_from_bits(kDefaultNaN32));

  CONCORD_HD static float widen(std::uint16_t b) { return bfloat16_to_float(b); }
  CONCORD_HD static std::uint16_t narrow(float f) { return float_to_bfloat16(f); }
  static constexpr std::uint16_t narrow_any(float f) { return float_to_bfloat16(f); }
};

// The default NaN narrowed: sign kept, quiet, no payload (0xfe00 and 0xffc0 on x86-64).
static_assert(Half16::kDefaultNaN == (((kDefaultNaN32 >> 16) & 0x8000u) | 0x7e00u));
static_assert(BFloat16_16::kDefaultNaN == (kDefaultNaN32 >> 16));

template <class Fmt>
CONCORD_HD bool is_nan16(std::uint16_t v) {
  return (v & 0x7fffu) > Fmt::kInf;
}

// The 16-bit result of r = widen(x) op widen(y) (y: or the 16-bit image of a scale
// factor), as the host computes it: narrow(r) for a number; otherwise the operand
// NaN the CPU propagates, made quiet (narrowing a quiet NaN keeps its top payload
// bits, which are all of a 16-bit NaN's), or the CPU's default NaN, narrowed.
template <class Fmt>
CONCORD_HD std::uint16_t finish16(float r, std::uint16_t x, std::uint16_t y) {
  const bool x_nan = is_nan16<Fmt>(x);
  const bool y_nan = is_nan16<Fmt>(y);
  std::uint16_t out = (r != r) ? Fmt::kDefaultNaN : Fmt::narrow(r);
  out = y_nan ? static_cast<std::uint16_t>(y | Fmt::kQuiet) : out;
  out = x_nan ? static_cast<std::uint16_t>(x | Fmt::kQuiet) : out;
  if constexpr (kSignallingNaNFirst && !Fmt::kWidenQuiets) {
    out = (y_nan && (y & Fmt::kQuiet) == 0) ? static_cast<std::uint16_t>(y | Fmt::kQuiet) : out;
    out = (x_nan && (x & Fmt::kQuiet) == 0) ? static_cast<std::uint16_t>(x | Fmt::kQuiet) : out;
  }
  return out;
}

// Sum / Prod: widen both, compute in float, round once. (float has more than 2p + 2
// bits for both formats' precision p, so this is the correctly rounded result.)
template <class Fmt>
struct Sum16 {
  using value_type = std::uint16_t;
  CONCORD_HD std::uint16_t operator()(std::uint16_t x, std::uint16_t y) const {
    return finish16<Fmt>(add_rn(Fmt::widen(x), Fmt::widen(y)), x, y);
  }
};
template <class Fmt>
struct Prod16 {
  using value_type = std::uint16_t;
  CONCORD_HD std::uint16_t operator()(std::uint16_t x, std::uint16_t y) const {
    return finish16<Fmt>(mul_rn(Fmt::widen(x), Fmt::widen(y)), x, y);
  }
};

// Min / Max on the bits, as the host: key() maps sign-magnitude to a signed integer
// in numeric order with -0 just below +0, one-to-one; NaNs as for float.
template <class Fmt, bool kMax>
struct MinMax16 {
  using value_type = std::uint16_t;
  CONCORD_HD static int key(std::int16_t s) { return s ^ ((s >> 15) & 0x7fff); }
  CONCORD_HD std::uint16_t operator()(std::uint16_t x, std::uint16_t y) const {
    const auto sx = static_cast<std::int16_t>(x);
    const auto sy = static_cast<std::int16_t>(y);
    const int kx = key(sx);
    const int ky = key(sy);
    const bool x_wins = kMax ? (ky < kx) : (kx < ky);
    std::uint16_t r = x_wins ? x : y;
    r = is_nan16<Fmt>(y) ? static_cast<std::uint16_t>(y | Fmt::kQuiet) : r;
    r = is_nan16<Fmt>(x) ? static_cast<std::uint16_t>(x | Fmt::kQuiet) : r;
    return r;
  }
};

// ---- scale: x * factor, rounded as the host's scale() ----------------------------
// Built on the host with make() (the double -> float conversion of the factor
// happens there, as in the host kernel, NaN payload included), then passed to
// kernels by value.

struct ScaleF32 {
  using value_type = float;
  float s = 1.0f;
  static ScaleF32 make(double factor) { return {static_cast<float>(factor)}; }
  CONCORD_HD float operator()(float x) const { return host_nan(mul_rn(x, s), x, s); }
};
struct ScaleF64 {
  using value_type = double;
  double s = 1.0;
  static ScaleF64 make(double factor) { return {factor}; }
  CONCORD_HD double operator()(double x) const { return host_nan(mul_rn(x, s), x, s); }
};
template <class Fmt>
struct Scale16 {
  using value_type = std::uint16_t;
  float s = 1.0f;
  std::uint16_t s16 = 0;  // the factor in 16 bits: the result when only it is NaN
  static Scale16 make(double factor) {
    const float f = static_cast<float>(factor);
    return {f, Fmt::narrow_any(f)};
  }
  CONCORD_HD std::uint16_t operator()(std::uint16_t x) const {
    return finish16<Fmt>(mul_rn(Fmt::widen(x), s), x, s16);
  }
};
// The integer types have no scale; batched copies of them only copy.
struct NoScale {
  using value_type = std::uint8_t;
  static NoScale make(double /*factor*/) { return {}; }
  CONCORD_HD std::uint8_t operator()(std::uint8_t x) const { return x; }
};

// ---- dispatch: the one place that maps (dtype, op) to a functor ------------------

template <DataType D>
struct Element;
template <>
struct Element<DataType::Int8> {
  using type = std::int8_t;
};
template <>
struct Element<DataType::UInt8> {
  using type = std::uint8_t;
};
template <>
struct Element<DataType::Int32> {
  using type = std::int32_t;
};
template <>
struct Element<DataType::Int64> {
  using type = std::int64_t;
};
template <>
struct Element<DataType::Float16> {
  using type = std::uint16_t;
  using format = Half16;
};
template <>
struct Element<DataType::BFloat16> {
  using type = std::uint16_t;
  using format = BFloat16_16;
};
template <>
struct Element<DataType::Float32> {
  using type = float;
};
template <>
struct Element<DataType::Float64> {
  using type = double;
};

// Calls fn(Functor{}) for (D, op); Avg reduces as Sum (the same functor type, so the
// kernels are not instantiated twice). Returns false where !is_supported(D, op).
template <DataType D, class Fn>
bool visit_reduce_op(ReduceOp op, Fn&& fn) {
  using T = typename Element<D>::type;
  if constexpr (D == DataType::Float16 || D == DataType::BFloat16) {
    using Fmt = typename Element<D>::format;
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        fn(Sum16<Fmt>{});
        return true;
      case ReduceOp::Prod:
        fn(Prod16<Fmt>{});
        return true;
      case ReduceOp::Min:
        fn(MinMax16<Fmt, false>{});
        return true;
      case ReduceOp::Max:
        fn(MinMax16<Fmt, true>{});
        return true;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        fn(FloatSum<T>{});
        return true;
      case ReduceOp::Prod:
        fn(FloatProd<T>{});
        return true;
      case ReduceOp::Min:
        fn(FloatMinMax<T, false>{});
        return true;
      case ReduceOp::Max:
        fn(FloatMinMax<T, true>{});
        return true;
    }
  } else {
    switch (op) {
      case ReduceOp::Sum:
        fn(IntSum<T>{});
        return true;
      case ReduceOp::Prod:
        fn(IntProd<T>{});
        return true;
      case ReduceOp::Min:
        fn(IntMin<T>{});
        return true;
      case ReduceOp::Max:
        fn(IntMax<T>{});
        return true;
      case ReduceOp::Avg:
        return false;  // integer Avg is not defined
    }
  }
  return false;
}

template <class Fn>
bool visit_reduce_op(DataType dtype, ReduceOp op, Fn&& fn) {
  switch (dtype) {
    case DataType::Int8:
      return visit_reduce_op<DataType::Int8>(op, fn);
    case DataType::UInt8:
      return visit_reduce_op<DataType::UInt8>(op, fn);
    case DataType::Int32:
      return visit_reduce_op<DataType::Int32>(op, fn);
    case DataType::Int64:
      return visit_reduce_op<DataType::Int64>(op, fn);
    case DataType::Float16:
      return visit_reduce_op<DataType::Float16>(op, fn);
    case DataType::BFloat16:
      return visit_reduce_op<DataType::BFloat16>(op, fn);
    case DataType::Float32:
      return visit_reduce_op<DataType::Float32>(op, fn);
    case DataType::Float64:
      return visit_reduce_op<DataType::Float64>(op, fn);
  }
  return false;
}

// Calls fn(ScaleFunctor::make(factor)) for a floating-point dtype; for an integer
// dtype fn(NoScale{}) when copy_only_ok (batched copies), else returns false.
template <class Fn>
bool visit_scale_op(DataType dtype, double factor, bool copy_only_ok, Fn&& fn) {
  switch (dtype) {
    case DataType::Float16:
      fn(Scale16<Half16>::make(factor));
      return true;
    case DataType::BFloat16:
      fn(Scale16<BFloat16_16>::make(factor));
      return true;
    case DataType::Float32:
      fn(ScaleF32::make(factor));
      return true;
    case DataType::Float64:
      fn(ScaleF64::make(factor));
      return true;
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Int32:
    case DataType::Int64:
      if (!copy_only_ok) return false;
      fn(NoScale{});
      return true;
  }
  return false;
}

}  // namespace concord::detail::cuda::ops
