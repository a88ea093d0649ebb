// float <-> IEEE half and float <-> bfloat16 conversions (src/reduce/half.hpp),
// against references written independently here: a value-based round-to-nearest-
// even in double, GCC's _Float16 (libgcc's soft-float conversions), and F16C
// hardware when this CPU has it.
#include "reduce/half.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <xmmintrin.h>
#endif

namespace {

using concord::detail::bfloat16_to_float;
using concord::detail::float_to_bfloat16;
using concord::detail::float_to_half;
using concord::detail::half_to_float;

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::string hex(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// A binary floating-point format with `mant` stored mantissa bits and `exp` exponent bits.
struct Format {
  int mant;
  int exp;
  int bias() const { return (1 << (exp - 1)) - 1; }
  int emin() const { return 1 - bias(); }  // exponent of the smallest normal
  std::uint32_t inf() const { return ((1u << exp) - 1u) << mant; }
  std::uint32_t quiet_bit() const { return 1u << (mant - 1); }
  std::uint32_t sign_bit() const { return 1u << (mant + exp); }
};
constexpr Format kHalf{10, 5};
constexpr Format kBF16{7, 8};

// Value of an encoding, in double (exact).
double decode(Format f, std::uint32_t b) {
  const bool neg = (b & f.sign_bit()) != 0;
  const std::uint32_t e = (b >> f.mant) & ((1u << f.exp) - 1u);
  const std::uint32_t m = b & ((1u << f.mant) - 1u);
  double v;
  if (e == (1u << f.exp) - 1u) {
    v = m != 0 ? std::nan("") : INFINITY;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), f.emin() - f.mant);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.mant)),
                   static_cast<int>(e) - f.bias() - f.mant);
  }
  return neg ? -v : v;
}

// Round a finite or infinite (non-NaN) double to the format, nearest-even, by value.
std::uint32_t encode_rne(Format f, double v) {
  const std::uint32_t sign = std::signbit(v) ? f.sign_bit() : 0u;
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | f.inf();
  if (a == 0.0) return sign;
  int e2;
  std::frexp(a, &e2);  // a = fraction * 2^e2, fraction in [0.5, 1)
  int e = e2 - 1;      // a in [2^e, 2^(e+1))
  if (e < f.emin()) e = f.emin();
  const double ulp = std::ldexp(1.0, e - f.mant);
  const double q = a / ulp;  // exact: power-of-two scaling
  double n = std::floor(q);
  const double frac = q - n;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) != 0.0)) n += 1.0;
  auto ni = static_cast<std::uint64_t>(n);
  if (ni == (2ull << f.mant)) {  // rounded up to the next binade
    ni >>= 1;
    ++e;
  }
  if (ni < (1ull << f.mant)) return sign | static_cast<std::uint32_t>(ni);  // subnormal
  const int field = e + f.bias();
  if (field >= (1 << f.exp) - 1) return sign | f.inf();
  return sign | (static_cast<std::uint32_t>(field) << f.mant) |
         static_cast<std::uint32_t>(ni - (1ull << f.mant));
}

// Expected float -> 16-bit result: NaN quiet with top payload, else RNE by value.
std::uint32_t reference_from_float(Format f, float x) {
  const std::uint32_t u = bits_of(x);
  if (std::isnan(x)) {
    const std::uint32_t sign = (u >> 31) != 0 ? f.sign_bit() : 0u;
    return sign | f.inf() | f.quiet_bit() | ((u & 0x7fffffu) >> (23 - f.mant));
  }
  return encode_rne(f, static_cast<double>(x));
}

#if defined(__FLT16_MAX__)
std::uint16_t f16_bits(_Float16 h) {
  std::uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}
_Float16 f16_of(std::uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, sizeof h);
  return h;
}
#endif

#if defined(__x86_64__)
bool cpu_has_f16c() {
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // CPUID.1:ECX.F16C[bit 29]
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
         (ecx & bit_F16C) != 0;
}
__attribute__((target("avx,f16c"))) void hw_half_to_float(const std::uint16_t* in, float* out) {
  _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
}
__attribute__((target("avx,f16c"))) void hw_float_to_half(const float* in, std::uint16_t* out) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
}
#endif

// Floats that probe every rounding boundary of a 16-bit format: for each finite
// positive encoding h, its value, the midpoint to the next encoding and the floats
// right beside both; with both signs.
template <class Fn>
void for_each_boundary_float(Format f, Fn&& fn) {
  const std::uint32_t top = f.inf();
  for (std::uint32_t h = 0; h < top; ++h) {
    const double lo = decode(f, h);
    const double hi =
        h + 1 < top ? decode(f, h + 1) : std::ldexp(1.0, (1 << (f.exp - 1)));  // 2^(emax+1)
    const auto mid = static_cast<float>((lo + hi) / 2);                        // exact in float
    const auto val = static_cast<float>(lo);
    for (float x : {val, std::nextafter(val, INFINITY), std::nextafter(val, 0.0f), mid,
                    std::nextafter(mid, INFINITY), std::nextafter(mid, 0.0f)}) {
      fn(x);
      fn(-x);
    }
  }
}

}  // namespace

// ---- IEEE half ---------------------------------------------------------------------

TEST_CASE("half: known values", "[half]") {
  CHECK(float_to_half(0.0f) == 0x0000);
  CHECK(float_to_half(-0.0f) == 0x8000);
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);    // largest finite
  CHECK(float_to_half(0x1p-14f) == 0x0400);    // smallest normal
  CHECK(float_to_half(0x1p-24f) == 0x0001);    // smallest subnormal
  CHECK(float_to_half(0x3ffp-24f) == 0x03ff);  // largest subnormal
  CHECK(half_to_float(0x3c00) == 1.0f);
  CHECK(half_to_float(0x7bff) == 65504.0f);
  CHECK(half_to_float(0x0001) == 0x1p-24f);
  CHECK(half_to_float(0x83ff) == -0x3ffp-24f);
  CHECK(bits_of(half_to_float(0x8000)) == 0x80000000u);
  CHECK(half_to_float(0x7c00) == INFINITY);
  CHECK(half_to_float(0xfc00) == -INFINITY);
  // Usable in constant expressions.
  static_assert(float_to_half(1.5f) == 0x3e00);
  static_assert(half_to_float(0xc100) == -2.5f);
  static_assert(float_to_bfloat16(1.0f) == 0x3f80);
  static_assert(bfloat16_to_float(0xbf80) == -1.0f);
}

TEST_CASE("half: rounding edge cases", "[half]") {
  SECTION("ties to even") {
    // 1 + 2^-11 lies halfway between 1 (even) and 1 + 2^-10 (odd).
    CHECK(float_to_half(1.0f + 0x1p-11f) == 0x3c00);
    CHECK(float_to_half(std::nextafter(1.0f + 0x1p-11f, 2.0f)) == 0x3c01);
    // 1 + 3*2^-11 lies between 1 + 2^-10 (odd) and 1 + 2^-9 (even): up.
    CHECK(float_to_half(1.0f + 3 * 0x1p-11f) == 0x3c02);
    CHECK(float_to_half(-(1.0f + 3 * 0x1p-11f)) == 0xbc02);
    // Carry out of the mantissa into the exponent: 2 - 2^-11 -> 2.
    CHECK(float_to_half(2.0f - 0x1p-11f) == 0x4000);
    CHECK(float_to_half(2048.0f + 1.0f) == 0x6800);  // 2049 -> 2048 (even)
    CHECK(float_to_half(2048.0f + 3.0f) == 0x6802);  // 2051 -> 2052 (even)
  }
  SECTION("overflow to infinity") {
    CHECK(float_to_half(65519.0f) == 0x7bff);
    CHECK(float_to_half(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
    CHECK(float_to_half(65520.0f) == 0x7c00);  // tie; 0x7bff is odd, so up to inf
    CHECK(float_to_half(-65520.0f) == 0xfc00);
    CHECK(float_to_half(1e10f) == 0x7c00);
    CHECK(float_to_half(3.0e38f) == 0x7c00);
    CHECK(float_to_half(INFINITY) == 0x7c00);
    CHECK(float_to_half(-INFINITY) == 0xfc00);
  }
  SECTION("subnormals and underflow") {
    CHECK(float_to_half(0x1p-25f) == 0x0000);  // tie between 0 (even) and 2^-24
    CHECK(float_to_half(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);
    CHECK(float_to_half(-std::nextafter(0x1p-25f, 1.0f)) == 0x8001);
    CHECK(float_to_half(3 * 0x1p-25f) == 0x0002);  // 1.5 ulp -> 2 (even)
    CHECK(float_to_half(5 * 0x1p-25f) == 0x0002);  // 2.5 ulp -> 2 (even)
    CHECK(float_to_half(0x1p-26f) == 0x0000);
    CHECK(float_to_half(-0x1p-26f) == 0x8000);
    CHECK(float_to_half(0x1p-14f - 0x1p-25f) == 0x0400);  // halfway below 2^-14: up (even)
    CHECK(float_to_half(std::nextafter(0x1p-14f - 0x1p-25f, 0.0f)) == 0x03ff);
    CHECK(float_to_half(0x1p-149f) == 0x0000);  // float subnormals
    CHECK(float_to_half(-0x1p-130f) == 0x8000);
  }
  SECTION("NaN stays NaN, quiet, sign and top payload kept") {
    CHECK(float_to_half(float_of(0x7fc00000u)) == 0x7e00);
    CHECK(float_to_half(float_of(0xffc00000u)) == 0xfe00);
    CHECK(float_to_half(float_of(0x7f800001u)) == 0x7e00);  // signalling, payload below half's
    CHECK(float_to_half(float_of(0x7fa00000u)) == 0x7f00);  // signalling, payload kept
    CHECK(float_to_half(float_of(0x7fffffffu)) == 0x7fff);
    CHECK(bits_of(half_to_float(0x7c01)) == 0x7fc02000u);  // quietened, as VCVTPH2PS does
    CHECK(bits_of(half_to_float(0xfe00)) == 0xffc00000u);
    CHECK(bits_of(half_to_float(0x7fff)) == 0x7fffe000u);
  }
}

TEST_CASE("half: all 65536 encodings widen exactly and round-trip", "[half]") {
  int bad_value = 0, bad_roundtrip = 0, bad_f16 = 0;
  std::uint32_t first_bad = 0;
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const auto hb = static_cast<std::uint16_t>(h);
    const float f = half_to_float(hb);
    const double expected = decode(kHalf, h);
    const bool nan = (h & 0x7fffu) > 0x7c00u;
    if (nan) {
      // Quiet NaN, sign kept, payload moved up unchanged.
      const std::uint32_t want = ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13);
      if (bits_of(f) != want) ++bad_value, first_bad = h;
      if (float_to_half(f) != (h | 0x200u)) ++bad_roundtrip, first_bad = h;
    } else {
      if (static_cast<double>(f) != expected || std::signbit(f) != ((h & 0x8000u) != 0)) {
        ++bad_value, first_bad = h;
      }
      if (float_to_half(f) != h) ++bad_roundtrip, first_bad = h;
#if defined(__FLT16_MAX__)
      if (bits_of(static_cast<float>(f16_of(hb))) != bits_of(f)) ++bad_f16, first_bad = h;
#endif
    }
  }
  INFO("a failing encoding: " << hex(first_bad));
  CHECK(bad_value == 0);
  CHECK(bad_roundtrip == 0);
  CHECK(bad_f16 == 0);
}

TEST_CASE("half: float -> half at every rounding boundary", "[half]") {
  int bad = 0, bad_f16 = 0;
  std::uint32_t first_bad = 0;
  for_each_boundary_float(kHalf, [&](float x) {
    const std::uint16_t got = float_to_half(x);
    if (got != reference_from_float(kHalf, x)) ++bad, first_bad = bits_of(x);
#if defined(__FLT16_MAX__)
    if (got != f16_bits(static_cast<_Float16>(x))) ++bad_f16, first_bad = bits_of(x);
#endif
  });
  INFO("a failing float: " << hex(first_bad));
  CHECK(bad == 0);
  CHECK(bad_f16 == 0);
}

TEST_CASE("half: float -> half on random and swept floats", "[half]") {
  std::mt19937 rng(12345);
  int bad = 0, bad_f16 = 0;
  std::uint32_t first_bad = 0;
  auto check = [&](std::uint32_t u) {
    const float x = float_of(u);
    const std::uint16_t got = float_to_half(x);
    if (got != reference_from_float(kHalf, x)) ++bad, first_bad = u;
#if defined(__FLT16_MAX__)
    if (!std::isnan(x) && got != f16_bits(static_cast<_Float16>(x))) ++bad_f16, first_bad = u;
#endif
  };
  for (int i = 0; i < 1000000; ++i) check(static_cast<std::uint32_t>(rng()));
  // Every float exponent, several mantissas each, dense around half's range.
  for (std::uint32_t u = 0; u < 0x80000000u; u += 0x1001u) {
    check(u);
    check(u | 0x80000000u);
  }
  INFO("a failing float: " << hex(first_bad));
  CHECK(bad == 0);
  CHECK(bad_f16 == 0);
}

#if defined(__x86_64__)
TEST_CASE("half: bit-identical to F16C hardware", "[half]") {
  if (!cpu_has_f16c()) {
    WARN("CPU has no F16C; skipping");
    return;
  }
  int bad_widen = 0, bad_narrow = 0;
  std::uint32_t first_bad = 0;
  for (std::uint32_t h = 0; h < 0x10000u; h += 8) {
    std::uint16_t in[8];
    float out[8];
    for (std::uint32_t k = 0; k < 8; ++k) in[k] = static_cast<std::uint16_t>(h + k);
    hw_half_to_float(in, out);
    for (std::uint32_t k = 0; k < 8; ++k) {
      if (bits_of(out[k]) != bits_of(half_to_float(in[k]))) ++bad_widen, first_bad = h + k;
    }
  }
  std::mt19937 rng(777);
  auto narrow8 = [&](const float* in) {
    std::uint16_t out[8];
    hw_float_to_half(in, out);
    for (int k = 0; k < 8; ++k) {
      if (out[k] != float_to_half(in[k])) ++bad_narrow, first_bad = bits_of(in[k]);
    }
  };
  std::vector<float> boundary;
  for_each_boundary_float(kHalf, [&](float x) { boundary.push_back(x); });
  boundary.resize(boundary.size() / 8 * 8);
  for (std::size_t i = 0; i < boundary.size(); i += 8) narrow8(&boundary[i]);
  for (int i = 0; i < 200000; ++i) {
    float in[8];
    for (float& x : in) x = float_of(static_cast<std::uint32_t>(rng()));
    narrow8(in);
  }
  INFO("a failing input: " << hex(first_bad));
  CHECK(bad_widen == 0);
  CHECK(bad_narrow == 0);
}
#endif

#if defined(__x86_64__)
TEST_CASE("half: conversions ignore MXCSR flush-to-zero / denormals-are-zero", "[half]") {
  // Nothing in half <-> float needs a float subnormal: the results must not change
  // when a process runs with FTZ/DAZ set (-ffast-math, torch.set_flush_denormal).
  std::vector<std::uint32_t> widened(0x10000);
  std::vector<std::uint16_t> narrowed(0x10000);
  auto convert = [](std::vector<std::uint32_t>& w, std::vector<std::uint16_t>& nar) {
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
      w[h] = bits_of(half_to_float(static_cast<std::uint16_t>(h)));
      // Floats from 2^-26 to 2^-13 (half subnormal range) with varied mantissas.
      nar[h] = float_to_half(float_of(0x32800000u + h * 0x1ffu));
    }
  };
  convert(widened, narrowed);
  std::vector<std::uint32_t> widened_ftz(0x10000);
  std::vector<std::uint16_t> narrowed_ftz(0x10000);
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ | DAZ
  convert(widened_ftz, narrowed_ftz);
  _mm_setcsr(csr);
  CHECK(widened == widened_ftz);
  CHECK(narrowed == narrowed_ftz);
}
#endif

// ---- bfloat16 ----------------------------------------------------------------------

TEST_CASE("bfloat16: known values and rounding edge cases", "[half]") {
  CHECK(float_to_bfloat16(0.0f) == 0x0000);
  CHECK(float_to_bfloat16(-0.0f) == 0x8000);
  CHECK(float_to_bfloat16(1.0f) == 0x3f80);
  CHECK(float_to_bfloat16(-3.0f) == 0xc040);
  CHECK(bfloat16_to_float(0x3f80) == 1.0f);
  CHECK(bfloat16_to_float(0x7f80) == INFINITY);
  SECTION("ties to even") {
    CHECK(float_to_bfloat16(float_of(0x3f808000u)) == 0x3f80);  // tie, even stays
    CHECK(float_to_bfloat16(float_of(0x3f818000u)) == 0x3f82);  // tie, odd goes up
    CHECK(float_to_bfloat16(float_of(0x3f808001u)) == 0x3f81);
    CHECK(float_to_bfloat16(float_of(0x3f807fffu)) == 0x3f80);
    CHECK(float_to_bfloat16(float_of(0xbf818000u)) == 0xbf82);
    CHECK(float_to_bfloat16(float_of(0x3fff8000u)) == 0x4000);  // carry into exponent
  }
  SECTION("overflow to infinity") {
    CHECK(float_to_bfloat16(float_of(0x7f7f7fffu)) == 0x7f7f);
    CHECK(float_to_bfloat16(float_of(0x7f7f8000u)) == 0x7f80);  // tie, odd -> inf
    CHECK(float_to_bfloat16(float_of(0x7f7fffffu)) == 0x7f80);  // FLT_MAX
    CHECK(float_to_bfloat16(float_of(0xff7fffffu)) == 0xff80);
    CHECK(float_to_bfloat16(INFINITY) == 0x7f80);
    CHECK(float_to_bfloat16(-INFINITY) == 0xff80);
  }
  SECTION("subnormals") {
    CHECK(float_to_bfloat16(float_of(0x00000001u)) == 0x0000);
    CHECK(float_to_bfloat16(float_of(0x00008000u)) == 0x0000);  // tie to even (0)
    CHECK(float_to_bfloat16(float_of(0x00008001u)) == 0x0001);
    CHECK(float_to_bfloat16(float_of(0x00018000u)) == 0x0002);  // tie to even (2)
    CHECK(float_to_bfloat16(float_of(0x007f8000u)) == 0x0080);  // up to smallest normal
    CHECK(float_to_bfloat16(float_of(0x807fffffu)) == 0x8080);
    CHECK(bits_of(bfloat16_to_float(0x0001)) == 0x00010000u);
  }
  SECTION("NaN stays NaN, quiet") {
    CHECK(float_to_bfloat16(float_of(0x7fc00000u)) == 0x7fc0);
    CHECK(float_to_bfloat16(float_of(0xffc00001u)) == 0xffc0);
    CHECK(float_to_bfloat16(float_of(0x7f800001u)) == 0x7fc0);  // payload below bf16's
    CHECK(float_to_bfloat16(float_of(0x7f810000u)) == 0x7fc1);
    CHECK(float_to_bfloat16(float_of(0x7fffffffu)) == 0x7fff);  // must not carry to 0x8000
    CHECK(float_to_bfloat16(float_of(0xffffffffu)) == 0xffff);
  }
}

TEST_CASE("bfloat16: all 65536 encodings widen exactly and round-trip", "[half]") {
  int bad_value = 0, bad_roundtrip = 0;
  std::uint32_t first_bad = 0;
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = bfloat16_to_float(static_cast<std::uint16_t>(b));
    const bool nan = (b & 0x7fffu) > 0x7f80u;
    if (nan) {
      if (!std::isnan(f) || (bits_of(f) >> 16) != b || (bits_of(f) & 0xffffu) != 0) {
        ++bad_value, first_bad = b;
      }
      if (float_to_bfloat16(f) != (b | 0x40u)) ++bad_roundtrip, first_bad = b;
    } else {
      if (static_cast<double>(f) != decode(kBF16, b) || std::signbit(f) != ((b & 0x8000u) != 0)) {
        ++bad_value, first_bad = b;
      }
      if (float_to_bfloat16(f) != b) ++bad_roundtrip, first_bad = b;
    }
  }
  INFO("a failing encoding: " << hex(first_bad));
  CHECK(bad_value == 0);
  CHECK(bad_roundtrip == 0);
}

TEST_CASE("bfloat16: float -> bfloat16 against a value-based reference", "[half]") {
  int bad = 0;
  std::uint32_t first_bad = 0;
  auto check = [&](std::uint32_t u) {
    const float x = float_of(u);
    if (float_to_bfloat16(x) != reference_from_float(kBF16, x)) ++bad, first_bad = u;
  };
  // Around every tie: the low 16 bits just below, at and above 0x8000, and the
  // extremes, for every upper half (all signs, exponents, NaN/inf included).
  for (std::uint32_t hi = 0; hi < 0x10000u; ++hi) {
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      check((hi << 16) | lo);
    }
  }
  std::mt19937 rng(4242);
  for (int i = 0; i < 1000000; ++i) check(static_cast<std::uint32_t>(rng()));
  for_each_boundary_float(kBF16, [&](float x) {
    if (float_to_bfloat16(x) != reference_from_float(kBF16, x)) ++bad, first_bad = bits_of(x);
  });
  INFO("a failing float: " << hex(first_bad));
  CHECK(bad == 0);
}
