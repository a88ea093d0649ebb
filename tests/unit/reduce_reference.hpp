// The scalar references the reduce-kernel tests check against, written
// independently of src/reduce: plain integer/float arithmetic, GCC's _Float16 for
// half rounding and a bit-level rounding formula for bfloat16; and the helpers
// that run a kernel on guarded, aliased buffers and compare every element.
// Shared by test_reduce_kernels.cpp and test_reduce_scale.cpp.
#pragma once

#include "unit/element_types.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <concord/types.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ios>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>
#include "reduce/reduce_kernels.hpp"
#include "reduce/reduce_tables.hpp"
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace reduce_reference {

using concord::DataType;
using concord::ReduceOp;
using concord::detail::ReduceFn;
using concord::detail::ScaleFn;
using concord::test::bitcast;
using concord::test::bits64;
using concord::test::kAllOps;
using concord::test::kAllTypes;
using concord::test::kFloatTypes;
using concord::test::with_element_type;

inline constexpr std::size_t kCounts[] = {0, 1, 7, 8, 9, 31, 33, 1000, 4099};

inline const char* type_name(DataType d) {
  switch (d) {
    case DataType::Int8:
      return "int8";
    case DataType::UInt8:
      return "uint8";
    case DataType::Int32:
      return "int32";
    case DataType::Int64:
      return "int64";
    case DataType::Float16:
      return "float16";
    case DataType::BFloat16:
      return "bfloat16";
    case DataType::Float32:
      return "float32";
    case DataType::Float64:
      return "float64";
  }
  return "?";
}
inline const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Avg:
      return "avg";
  }
  return "?";
}

// The tables this CPU runs: always "generic", plus "avx2" where supported.
inline std::vector<const char*> isas() {
  std::vector<const char*> out{"generic"};
  if (concord::detail::reduce_isa_available("avx2")) out.push_back("avx2");
  return out;
}

// ---- independent scalar references ------------------------------------------------

// 16-bit formats: widen, narrow with RNE, NaN test, quiet bit.
struct Half {
  static constexpr std::uint16_t kQuiet = 0x0200;
  static bool is_nan(std::uint16_t h) { return (h & 0x7fff) > 0x7c00; }
#if defined(__FLT16_MAX__)
  static float widen(std::uint16_t h) {
    return static_cast<float>(bitcast<_Float16>(h));
  }
  static std::uint16_t narrow(float f) {
    return bitcast<std::uint16_t>(static_cast<_Float16>(f));  // libgcc, RNE
  }
#else
  // No _Float16: decode by value and round by value (frexp / ldexp), RNE.
  static float widen(std::uint16_t h) {
    const int e = (h >> 10) & 0x1f;
    const int m = h & 0x3ff;
    float v = e == 0    ? std::ldexp(static_cast<float>(m), -24)
              : e == 31 ? (m ? std::numeric_limits<float>::quiet_NaN()
                             : std::numeric_limits<float>::infinity())
                        : std::ldexp(static_cast<float>(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
  }
  static std::uint16_t narrow(float f) {
    const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (std::isnan(f)) return sign | 0x7e00;
    double a = std::fabs(static_cast<double>(f));
    if (a >= 65520.0) return sign | 0x7c00;
    int e2;
    std::frexp(a, &e2);
    const int e = std::max(e2 - 1, -14);
    const double q = std::ldexp(a, 10 - e);
    double n = std::floor(q);
    if (q - n > 0.5 || (q - n == 0.5 && std::fmod(n, 2.0) != 0.0)) n += 1.0;
    const double v = std::ldexp(n, e - 10);  // rounded value; re-encode
    if (v == 0.0) return sign;
    if (v < 0x1p-14) return sign | static_cast<std::uint16_t>(std::ldexp(v, 24));
    std::frexp(v, &e2);
    const int ev = e2 - 1;
    return sign | static_cast<std::uint16_t>(((ev + 15) << 10) |
                                             (static_cast<int>(std::ldexp(v, 10 - ev)) - 0x400));
  }
#endif
};
struct BF16 {
  static constexpr std::uint16_t kQuiet = 0x0040;
  static bool is_nan(std::uint16_t b) { return (b & 0x7fff) > 0x7f80; }
  static float widen(std::uint16_t b) { return bitcast<float>(std::uint32_t{b} << 16); }
  // Truncate, then add one unit if the dropped bits exceed half a unit, or equal it
  // and the kept part is odd.
  static std::uint16_t narrow(float f) {
    const auto u = bitcast<std::uint32_t>(f);
    if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
    std::uint32_t kept = u >> 16;
    const std::uint32_t dropped = u & 0xffff;
    if (dropped > 0x8000 || (dropped == 0x8000 && (kept & 1))) ++kept;
    return static_cast<std::uint16_t>(kept);
  }
};

template <class T>
bool is_nan_value(DataType d, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    return d == DataType::Float16 ? Half::is_nan(v) : d == DataType::BFloat16 && BF16::is_nan(v);
  } else {
    return false;
  }
}

// Integer result modulo 2^bits, by exact arithmetic in a wider type.
template <class T>
T wrap_int(std::int64_t v) {
  if constexpr (sizeof(T) == 8) {
    return static_cast<T>(v);
  } else {
    constexpr std::int64_t mod = std::int64_t{1} << (8 * sizeof(T));
    std::int64_t r = ((v % mod) + mod) % mod;
    if (std::is_signed_v<T> && r > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
      r -= mod;
    }
    return static_cast<T>(r);
  }
}

template <class T>
T ref_int(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::Sum:
      if constexpr (sizeof(T) == 8) {
        return static_cast<T>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
      } else {
        return wrap_int<T>(std::int64_t{a} + std::int64_t{b});
      }
    case ReduceOp::Prod:
      if constexpr (sizeof(T) == 8) {
        return static_cast<T>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
      } else {
        return wrap_int<T>(std::int64_t{a} * std::int64_t{b});
      }
    case ReduceOp::Min:
      return std::min(a, b);
    case ReduceOp::Max:
      return std::max(a, b);
    case ReduceOp::Avg:
      break;
  }
  return T{};
}

// Min/Max by the contract, with branches: NaN wins (quietened, a's first); -0 < +0.
template <class F>
F ref_float_minmax(bool is_max, F a, F b) {
  using Bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  const Bits quiet = static_cast<Bits>(sizeof(F) == 4 ? 0x00400000ull : 0x0008000000000000ull);
  if (std::isnan(a)) return bitcast<F>(bitcast<Bits>(a) | quiet);
  if (std::isnan(b)) return bitcast<F>(bitcast<Bits>(b) | quiet);
  if (a == 0 && b == 0) {
    const bool neg =
        is_max ? (std::signbit(a) && std::signbit(b)) : (std::signbit(a) || std::signbit(b));
    return neg ? F(-0.0) : F(0.0);
  }
  if (is_max) return a < b ? b : a;
  return b < a ? b : a;
}

template <class F>
F ref_float(ReduceOp op, F a, F b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return a + b;
    case ReduceOp::Prod:
      return a * b;
    case ReduceOp::Min:
      return ref_float_minmax(false, a, b);
    case ReduceOp::Max:
      return ref_float_minmax(true, a, b);
  }
  return F{};
}

template <class Fmt>
std::uint16_t ref_16(ReduceOp op, std::uint16_t a, std::uint16_t b) {
  if (op == ReduceOp::Min || op == ReduceOp::Max) {
    // Exact: the result is one of the inputs (NaN: quietened).
    if (Fmt::is_nan(a)) return a | Fmt::kQuiet;
    if (Fmt::is_nan(b)) return b | Fmt::kQuiet;
    const float r = ref_float_minmax(op == ReduceOp::Max, Fmt::widen(a), Fmt::widen(b));
    return Fmt::narrow(r);
  }
  return Fmt::narrow(ref_float(op, Fmt::widen(a), Fmt::widen(b)));
}

template <class T>
T reference(DataType d, ReduceOp op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return ref_float(op, a, b);
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    return d == DataType::Float16 ? ref_16<Half>(op, a, b) : ref_16<BF16>(op, a, b);
  } else {
    return ref_int(op, a, b);
  }
}

// Does `got` satisfy the contract where the reference says `want`? Bit-exact, except
// that arithmetic producing NaN may give any quiet NaN.
template <class T>
bool matches(DataType d, ReduceOp op, T want, T got) {
  if (std::memcmp(&want, &got, sizeof(T)) == 0) return true;
  const bool arith = op == ReduceOp::Sum || op == ReduceOp::Prod || op == ReduceOp::Avg;
  return arith && is_nan_value(d, want) && is_nan_value(d, got);
}

// ---- random inputs ------------------------------------------------------------------

template <class T>
T random_value(DataType d, std::mt19937_64& rng, bool allow_nan) {
  const std::uint64_t r = rng();
  const unsigned pick = static_cast<unsigned>(r >> 56);  // 0..255
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const T specials[] = {T(0.0),
                          T(-0.0),
                          std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity(),
                          std::numeric_limits<T>::denorm_min(),
                          -std::numeric_limits<T>::denorm_min() * 3,
                          std::numeric_limits<T>::max(),
                          std::numeric_limits<T>::lowest(),
                          std::numeric_limits<T>::min()};
    if (pick < 24) return specials[r % std::size(specials)];
    if (pick < 32 && allow_nan) {
      // Quiet and signalling NaNs with payloads, both signs.
      const Bits exp_all =
          static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
      const Bits mant_mask =
          static_cast<Bits>(sizeof(T) == 4 ? 0x007fffffull : 0x000fffffffffffffull);
      Bits m = static_cast<Bits>(r) & mant_mask;
      if (m == 0) m = 1;
      const Bits sign = (r & 0x100) ? Bits{1} << (8 * sizeof(T) - 1) : Bits{0};
      return bitcast<T>(static_cast<Bits>(sign | exp_all | m));
    }
    if (pick < 96) {  // any bit pattern (any exponent), NaN excluded unless allowed
      T v = bitcast<T>(static_cast<Bits>(r));
      return std::isnan(v) && !allow_nan ? T(1.5) : v;
    }
    // Moderate values in [-1000, 1000).
    return static_cast<T>((static_cast<double>(r & 0xffffffffffffull) / 0x1p48 - 0.5) * 2000.0);
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    auto v = static_cast<std::uint16_t>(r);
    if (pick < 128) {
      // Near 1 in magnitude (exponents 13..17 for half, 125..129 for bf16): sums of
      // these round often, with many ties.
      const unsigned k = (r >> 20) & 3;
      v = d == DataType::Float16 ? static_cast<std::uint16_t>((v & 0x83ff) | (0x3400 + (k << 10)))
                                 : static_cast<std::uint16_t>((v & 0x807f) | (0x3e80 + (k << 7)));
    }
    if (!allow_nan && is_nan_value(d, v)) v = 0x3c00;
    return v;
  } else {
    return static_cast<T>(r);  // any bits: wraparound happens often
  }
}

template <class T>
std::vector<T> random_vector(DataType d, std::size_t n, std::mt19937_64& rng, bool allow_nan) {
  std::vector<T> v(n);
  for (T& x : v) x = random_value<T>(d, rng, allow_nan);
  return v;
}

// ---- harness --------------------------------------------------------------------------

enum class Alias { Distinct, DstIsA, DstIsB, AIsB, AllSame };
inline constexpr Alias kAllAliases[] = {Alias::Distinct, Alias::DstIsA, Alias::DstIsB, Alias::AIsB,
                                        Alias::AllSame};
inline const char* alias_name(Alias a) {
  switch (a) {
    case Alias::Distinct:
      return "distinct";
    case Alias::DstIsA:
      return "dst==a";
    case Alias::DstIsB:
      return "dst==b";
    case Alias::AIsB:
      return "a==b";
    case Alias::AllSame:
      return "dst==a==b";
  }
  return "?";
}

inline constexpr std::size_t kGuard = 5;  // elements each side, must stay untouched

// Runs fn over random inputs of `count` elements (starting `offset` elements into
// the buffers, to vary alignment) in the given aliasing arrangement; checks every
// element against the reference and that nothing outside [0, count) changed.
template <class T>
void check_one(DataType d, ReduceOp op, ReduceFn fn, std::size_t count, Alias alias,
               std::size_t offset, std::mt19937_64& rng) {
  const std::size_t total = count + 2 * kGuard + offset;
  std::vector<T> a = random_vector<T>(d, total, rng, true);
  std::vector<T> b = random_vector<T>(d, total, rng, true);
  std::vector<T> dst = random_vector<T>(d, total, rng, true);
  if (alias == Alias::AIsB || alias == Alias::AllSame) b = a;
  const std::vector<T> a0 = a, b0 = b, dst0 = dst;

  const std::size_t base = kGuard + offset;
  T* pa = a.data() + base;
  T* pb = (alias == Alias::AIsB || alias == Alias::AllSame) ? pa : b.data() + base;
  T* pd = dst.data() + base;
  std::vector<T>* dst_buf = &dst;
  if (alias == Alias::DstIsA || alias == Alias::AllSame) pd = pa, dst_buf = &a;
  if (alias == Alias::DstIsB) pd = pb, dst_buf = &b;

  fn(pd, pa, pb, count);

  std::size_t bad = 0, first_bad = 0;
  T want_first{}, got_first{};
  for (std::size_t i = 0; i < count; ++i) {
    const T want = reference(d, op, a0[base + i], (pb == pa ? a0 : b0)[base + i]);
    const T got = (*dst_buf)[base + i];
    if (!matches(d, op, want, got)) {
      if (bad++ == 0) first_bad = i, want_first = want, got_first = got;
    }
  }
  // Untouched: guards of the destination buffer, and all of every other buffer.
  bool untouched = true;
  for (std::size_t i = 0; i < total; ++i) {
    const bool in_dst = i >= base && i < base + count;
    auto same = [&](const std::vector<T>& now, const std::vector<T>& before) {
      return std::memcmp(&now[i], &before[i], sizeof(T)) == 0;
    };
    if (!(dst_buf == &a && in_dst) && !same(a, a0)) untouched = false;
    if (!(dst_buf == &b && in_dst) && !same(b, b0)) untouched = false;
    if (!(dst_buf == &dst && in_dst) && !same(dst, dst0)) untouched = false;
  }
  INFO(type_name(d) << " " << op_name(op) << " count=" << count << " " << alias_name(alias)
                    << " offset=" << offset);
  INFO("first mismatch at " << first_bad << ": want bits 0x" << std::hex << bits64(want_first)
                            << " got bits 0x" << bits64(got_first));
  CHECK(bad == 0);
  CHECK(untouched);
}

// fn over explicit pairs, both argument orders; returns dst for (a, b) and (b, a).
template <class T>
std::pair<std::vector<T>, std::vector<T>> run_pairs(ReduceFn fn, const std::vector<T>& a,
                                                    const std::vector<T>& b) {
  std::vector<T> ab(a.size()), ba(a.size());
  fn(ab.data(), a.data(), b.data(), a.size());
  fn(ba.data(), b.data(), a.data(), a.size());
  return {ab, ba};
}

}  // namespace reduce_reference
