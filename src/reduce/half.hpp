// Conversions between float and the 16-bit floating-point formats, on raw bit
// patterns: IEEE 754 binary16 ("half", Float16) and bfloat16 (BFloat16).
//
// float -> 16 bit rounds to nearest, ties to even; values beyond the largest finite
// 16-bit value round to infinity; subnormal results are rounded correctly; NaN
// stays NaN, made quiet, keeping the sign and the top payload bits.
// 16 bit -> float is exact; half NaNs come back quiet, as F16C's VCVTPH2PS does.
//
// Every function is branch-free (mask selects only), so loops over them auto-vectorise,
// and constexpr. Nothing here reads or depends on MXCSR's flush-to-zero or
// denormals-are-zero modes; the one float addition (half subnormals) assumes the
// default rounding mode, round to nearest.
//
// The reduction kernels include this header from translation units compiled with
// different instruction sets. Each such TU defines CONCORD_HALF_ABI_NS first, so its
// copies of these inline functions get their own mangled names: the linker can
// never pick an AVX2-compiled copy for a baseline caller (which matters at -O0,
// where inline functions are emitted out of line).
#pragma once

#include <cstdint>

#ifndef CONCORD_HALF_ABI_NS
#define CONCORD_HALF_ABI_NS portable
#endif

namespace concord::detail {
inline namespace CONCORD_HALF_ABI_NS {

constexpr std::uint32_t float_bits(float f) noexcept {
  return __builtin_bit_cast(std::uint32_t, f);
}
constexpr float float_from_bits(std::uint32_t u) noexcept {
  return __builtin_bit_cast(float, u);
}
constexpr std::uint64_t double_bits(double d) noexcept {
  return __builtin_bit_cast(std::uint64_t, d);
}
constexpr double double_from_bits(std::uint64_t u) noexcept {
  return __builtin_bit_cast(double, u);
}

// c ? a : b with an all-ones/all-zeros mask instead of a conditional. A ?: here can
// end up as a branch around the float arithmetic feeding it, which GCC then will not
// if-convert (-ftrapping-math), and the loop stays scalar; the mask form vectorises.
constexpr std::uint32_t select_bits(bool c, std::uint32_t a, std::uint32_t b) noexcept {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return (a & m) | (b & ~m);
}

// ---- IEEE binary16 -------------------------------------------------------------

inline constexpr std::uint16_t kHalfInf = 0x7c00u;
inline constexpr std::uint16_t kHalfQuietNaN = 0x7e00u;

constexpr bool half_is_nan(std::uint16_t h) noexcept {
  return (h & 0x7fffu) > 0x7c00u;
}

constexpr float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;  // exponent and mantissa
  // Normal: rebias the exponent from 15 to 127.
  const std::uint32_t normal = (em << 13) + 0x38000000u;
  // Inf/NaN: all-ones exponent; a NaN gets the quiet bit.
  const std::uint32_t inf_nan = (em << 13) | select_bits(em > 0x7c00u, 0x7fc00000u, 0x7f800000u);
  // Zero/subnormal: mantissa * 2^-24; exact (int -> float and a power-of-two scale
  // to a normal float), whatever the FTZ/DAZ modes.
  const std::uint32_t subnormal =
      float_bits(static_cast<float>(static_cast<std::int32_t>(em)) * 0x1p-24f);
  std::uint32_t r = select_bits(em >= 0x7c00u, inf_nan, normal);
  r = select_bits(em < 0x0400u, subnormal, r);
  return float_from_bits(sign | r);
}

constexpr std::uint16_t float_to_half(float f) noexcept {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  // Normal results (|f| >= 2^-14): rebias, then round to nearest even at bit 13;
  // a carry out of the mantissa correctly bumps the exponent.
  const std::uint32_t normal = (ax - 0x38000000u + 0x0fffu + ((ax >> 13) & 1u)) >> 13;
  // Subnormal results (|f| < 2^-14): in 0.5f + |f| the float ulp is 2^-24, the half
  // subnormal step, so the addition itself rounds to nearest even and the low
  // mantissa bits are the result (0x400, the smallest normal, when it rounds up).
  const float small = float_from_bits(select_bits(ax < 0x38800000u, ax, 0u));
  const std::uint32_t subnormal = float_bits(small + 0.5f) - 0x3f000000u;
  // NaN: quiet, top 10 payload bits kept (as VCVTPS2PH does).
  const std::uint32_t nan = ((ax >> 13) | 0x0200u) & 0x7fffu;
  std::uint32_t r = select_bits(ax < 0x38800000u, subnormal, normal);
  r = select_bits(ax >= 0x477ff000u, 0x7c00u, r);  // >= 65520 (incl. inf): rounds to inf
  r = select_bits(ax > 0x7f800000u, nan, r);
  return static_cast<std::uint16_t>(sign | r);
}

// ---- bfloat16 --------------------------------------------------------------------

inline constexpr std::uint16_t kBFloat16Inf = 0x7f80u;
inline constexpr std::uint16_t kBFloat16QuietNaN = 0x7fc0u;

constexpr bool bfloat16_is_nan(std::uint16_t b) noexcept {
  return (b & 0x7fffu) > 0x7f80u;
}

// Exact: a bfloat16 is the top half of a float (a NaN keeps its bits).
constexpr float bfloat16_to_float(std::uint16_t b) noexcept {
  return float_from_bits(static_cast<std::uint32_t>(b) << 16);
}

constexpr std::uint16_t float_to_bfloat16(float f) noexcept {
  const std::uint32_t x = float_bits(f);
  // Round to nearest even at bit 16; overflow carries into the exponent and ends at
  // inf, subnormals round like any other value.
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (x >> 16) | 0x0040u;  // quiet, sign and top payload kept
  return static_cast<std::uint16_t>(select_bits((x & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

}  // namespace CONCORD_HALF_ABI_NS
}  // namespace concord::detail
