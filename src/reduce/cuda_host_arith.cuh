// The host CPU's arithmetic as the CUDA kernels must reproduce it bit for bit
// (cuda_element_ops.cuh builds its functors on these): IEEE add and multiply
// rounded to nearest even, the NaN the CPU returns, and the 16-bit formats'
// widening, narrowing and NaN bits. Compiles with nvcc (host and device) and with
// a plain C++ compiler, as cuda_element_ops.cuh does.
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

#include <cstdint>

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
#error "cuda_host_arith.cuh: describe this CPU's NaN propagation (see x86-64 and AArch64)"
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

// ---- Float16 / BFloat16: the formats ---------------------------------------------

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

}  // namespace concord::detail::cuda::ops
