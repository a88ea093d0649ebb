// The reduction and scale kernels (src/reduce), every table this CPU can run, against
// scalar references written independently here: plain integer/float arithmetic,
// GCC's _Float16 for half rounding and a bit-level rounding formula for bfloat16.
#include "reduce/reduce_kernels.hpp"
#include "reduce/reduce_tables.hpp"

#include <concord/types.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
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

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace {

using concord::DataType;
using concord::ReduceOp;
using concord::detail::ReduceFn;
using concord::detail::ScaleFn;

constexpr DataType kAllTypes[] = {DataType::Int8,    DataType::UInt8,   DataType::Int32,
                                  DataType::Int64,   DataType::Float16, DataType::BFloat16,
                                  DataType::Float32, DataType::Float64};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                                ReduceOp::Avg};
constexpr std::size_t kCounts[] = {0, 1, 7, 8, 9, 31, 33, 1000, 4099};

const char* type_name(DataType d) {
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
const char* op_name(ReduceOp op) {
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
std::vector<const char*> isas() {
  std::vector<const char*> out{"generic"};
  if (concord::detail::reduce_isa_available("avx2")) out.push_back("avx2");
  return out;
}

template <class To, class From>
To bitcast(From f) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &f, sizeof t);
  return t;
}

template <class T>
std::uint64_t bits64(T v) {
  if constexpr (sizeof(T) == 1)
    return bitcast<std::uint8_t>(v);
  else if constexpr (sizeof(T) == 2)
    return bitcast<std::uint16_t>(v);
  else if constexpr (sizeof(T) == 4)
    return bitcast<std::uint32_t>(v);
  else
    return bitcast<std::uint64_t>(v);
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
constexpr Alias kAllAliases[] = {Alias::Distinct, Alias::DstIsA, Alias::DstIsB, Alias::AIsB,
                                 Alias::AllSame};
const char* alias_name(Alias a) {
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

constexpr std::size_t kGuard = 5;  // elements each side, must stay untouched

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

// Calls f.template operator()<T>() with T the storage type of d.
template <class F>
void with_type(DataType d, F&& f) {
  switch (d) {
    case DataType::Int8:
      f.template operator()<std::int8_t>();
      break;
    case DataType::UInt8:
      f.template operator()<std::uint8_t>();
      break;
    case DataType::Int32:
      f.template operator()<std::int32_t>();
      break;
    case DataType::Int64:
      f.template operator()<std::int64_t>();
      break;
    case DataType::Float16:
    case DataType::BFloat16:
      f.template operator()<std::uint16_t>();
      break;
    case DataType::Float32:
      f.template operator()<float>();
      break;
    case DataType::Float64:
      f.template operator()<double>();
      break;
  }
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

}  // namespace

TEST_CASE("reduce kernels: every table, dtype and op against the reference", "[reduce]") {
  std::mt19937_64 rng(20240611);
  for (const char* isa : isas()) {
    for (DataType d : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        const ReduceFn fn = concord::detail::reduce_kernel_from(isa, d, op);
        INFO("isa=" << isa << " " << type_name(d) << " " << op_name(op));
        if (!concord::is_supported(d, op)) {
          CHECK(fn == nullptr);
          continue;
        }
        REQUIRE(fn != nullptr);
        with_type(d, [&]<class T>() {
          for (std::size_t count : kCounts) {
            for (Alias alias : kAllAliases) {
              for (std::size_t offset : {0, 1}) check_one<T>(d, op, fn, count, alias, offset, rng);
            }
          }
        });
      }
    }
  }
}

TEST_CASE("reduce kernels: tables agree bit for bit", "[reduce]") {
  const auto tables = isas();
  if (tables.size() < 2) {
    WARN("only the generic table runs on this CPU");
    return;
  }
  std::mt19937_64 rng(99);
  for (DataType d : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!concord::is_supported(d, op)) continue;
      INFO(type_name(d) << " " << op_name(op));
      const ReduceFn g = concord::detail::reduce_kernel_from("generic", d, op);
      const ReduceFn v = concord::detail::reduce_kernel_from("avx2", d, op);
      with_type(d, [&]<class T>() {
        const std::size_t n = 20011;
        const auto a = random_vector<T>(d, n, rng, true);
        const auto b = random_vector<T>(d, n, rng, true);
        std::vector<T> rg(n), rv(n);
        g(rg.data(), a.data(), b.data(), n);
        v(rv.data(), a.data(), b.data(), n);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < n; ++i) {
          if (bits64(rg[i]) != bits64(rv[i]) &&
              !(is_nan_value(d, rg[i]) && is_nan_value(d, rv[i]))) {
            ++differ;
          }
        }
        CHECK(differ == 0);
      });
    }
  }
}

TEST_CASE("reduce kernels: result does not depend on argument order", "[reduce]") {
  // Bitwise commutativity without NaNs, for every op (Min/Max by the ±0 rule, the
  // rest by IEEE / modular arithmetic).
  std::mt19937_64 rng(31337);
  for (const char* isa : isas()) {
    for (DataType d : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (!concord::is_supported(d, op)) continue;
        INFO("isa=" << isa << " " << type_name(d) << " " << op_name(op));
        const ReduceFn fn = concord::detail::reduce_kernel_from(isa, d, op);
        with_type(d, [&]<class T>() {
          const auto a = random_vector<T>(d, 4099, rng, false);
          auto b = random_vector<T>(d, 4099, rng, false);
          for (std::size_t i = 0; i < b.size(); i += 3) b[i] = a[i];  // many equal pairs
          const auto [ab, ba] = run_pairs(fn, a, b);
          CHECK(std::memcmp(ab.data(), ba.data(), ab.size() * sizeof(T)) == 0);
        });
      }
    }
  }
}

TEST_CASE("reduce kernels: Min/Max signed zeros and NaNs", "[reduce]") {
  for (const char* isa : isas()) {
    INFO("isa=" << isa);
    auto kernel = [&](DataType d, ReduceOp op) {
      return concord::detail::reduce_kernel_from(isa, d, op);
    };
    {  // float32 / float64
      auto check_type = [&]<class F>(DataType d) {
        using Bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
        const F nan = std::numeric_limits<F>::quiet_NaN();
        const F snan = std::numeric_limits<F>::signaling_NaN();
        const F inf = std::numeric_limits<F>::infinity();
        const F pz = F(0.0), nz = F(-0.0);
        // 16 elements so the vector body, not just the scalar tail, sees them.
        std::vector<F> a = {pz,   nz,   pz,    nz,   nan, F(1), nan, -inf,
                            snan, F(2), F(-1), F(3), pz,  nz,   pz,  nz};
        std::vector<F> b = {nz,    pz,   pz,    nz,   F(1), nan, -nan, nan,
                            F(-5), snan, F(-1), F(3), nz,   pz,  pz,   nz};
        for (bool is_max : {false, true}) {
          const ReduceFn fn = kernel(d, is_max ? ReduceOp::Max : ReduceOp::Min);
          const auto [ab, ba] = run_pairs(fn, a, b);
          for (std::size_t i = 0; i < a.size(); ++i) {
            INFO("max=" << is_max << " i=" << i);
            const Bits want = bitcast<Bits>(ref_float_minmax(is_max, a[i], b[i]));
            CHECK(bitcast<Bits>(ab[i]) == want);
            if (std::isnan(a[i]) || std::isnan(b[i])) {
              CHECK(std::isnan(ba[i]));
            } else {
              CHECK(bitcast<Bits>(ba[i]) == want);
            }
          }
          // The ±0 cases, spelled out.
          const F zmin = is_max ? pz : nz;
          CHECK(std::signbit(ab[0]) == std::signbit(zmin));
          CHECK(std::signbit(ab[1]) == std::signbit(zmin));
          CHECK(std::signbit(ab[2]) == false);
          CHECK(std::signbit(ab[3]) == true);
          // Both NaN: a's payload and sign, made quiet.
          CHECK(bitcast<Bits>(ab[6]) == bitcast<Bits>(nan));
          CHECK(bitcast<Bits>(ba[6]) == bitcast<Bits>(-nan));
          // A signalling NaN comes out quiet, payload kept.
          const Bits quiet =
              static_cast<Bits>(sizeof(F) == 4 ? 0x00400000ull : 0x0008000000000000ull);
          CHECK(bitcast<Bits>(ab[8]) == (bitcast<Bits>(snan) | quiet));
          CHECK(bitcast<Bits>(ab[9]) == (bitcast<Bits>(snan) | quiet));
          CHECK(bitcast<Bits>(ba[9]) == (bitcast<Bits>(snan) | quiet));
        }
      };
      check_type.template operator()<float>(DataType::Float32);
      check_type.template operator()<double>(DataType::Float64);
    }
    {  // float16 / bfloat16
      for (DataType d : {DataType::Float16, DataType::BFloat16}) {
        const bool half = d == DataType::Float16;
        INFO(type_name(d));
        const std::uint16_t pz = 0x0000, nz = 0x8000;
        const std::uint16_t one = half ? 0x3c00 : 0x3f80;
        const std::uint16_t neg_two = 0xc000;  // -2 in both formats
        const std::uint16_t qnan = half ? 0x7e00 : 0x7fc0;
        const std::uint16_t snan = half ? 0x7c01 : 0x7f81;
        const std::uint16_t neg_nan_payload = half ? 0xfe55 : 0xffd5;
        const std::uint16_t ninf = half ? 0xfc00 : 0xff80;
        std::vector<std::uint16_t> a = {pz,   nz,  pz,  nz,      qnan, one, qnan, ninf,
                                        snan, one, one, neg_two, ninf, pz,  nz,   one};
        std::vector<std::uint16_t> b = {nz,   pz,  pz,   nz,      one, qnan, neg_nan_payload,
                                        qnan, one, snan, neg_two, one, pz,   ninf,
                                        nz,   one};
        for (bool is_max : {false, true}) {
          const ReduceFn fn = kernel(d, is_max ? ReduceOp::Max : ReduceOp::Min);
          const auto [ab, ba] = run_pairs(fn, a, b);
          INFO("max=" << is_max);
          const std::uint16_t zero = is_max ? pz : nz;
          const std::uint16_t quiet = half ? 0x0200 : 0x0040;
          CHECK(ab[0] == zero);
          CHECK(ba[0] == zero);
          CHECK(ab[1] == zero);
          CHECK(ba[1] == zero);
          CHECK(ab[2] == pz);
          CHECK(ab[3] == nz);
          CHECK(ab[4] == qnan);
          CHECK(ba[4] == qnan);
          CHECK(ab[6] == qnan);             // both NaN: a's
          CHECK(ba[6] == neg_nan_payload);  // ... either way round
          CHECK(ab[8] == (snan | quiet));   // quietened
          CHECK(ab[9] == (snan | quiet));
          CHECK(ab[10] == (is_max ? one : neg_two));
          CHECK(ba[10] == (is_max ? one : neg_two));
          CHECK(ab[12] == (is_max ? pz : ninf));
          CHECK(ab[13] == (is_max ? pz : ninf));
          CHECK(ab[14] == nz);
          CHECK(ab[15] == one);
          CHECK(ab[5] == qnan);
          CHECK(ab[7] == qnan);
        }
      }
    }
  }
}

TEST_CASE("reduce kernels: integer wraparound", "[reduce]") {
  for (const char* isa : isas()) {
    INFO("isa=" << isa);
    auto run = [&]<class T>(DataType d, ReduceOp op, T x, T y) {
      // 19 elements: vector body and tail.
      std::vector<T> a(19, x), b(19, y), out(19);
      concord::detail::reduce_kernel_from(isa, d, op)(out.data(), a.data(), b.data(), 19);
      const bool uniform = std::all_of(out.begin(), out.end(), [&](T v) { return v == out[0]; });
      CHECK(uniform);
      return out[0];
    };
    using I8 = std::int8_t;
    using U8 = std::uint8_t;
    using I32 = std::int32_t;
    using I64 = std::int64_t;
    CHECK(run(DataType::Int8, ReduceOp::Sum, I8{127}, I8{1}) == I8{-128});
    CHECK(run(DataType::Int8, ReduceOp::Sum, I8{-128}, I8{-1}) == I8{127});
    CHECK(run(DataType::Int8, ReduceOp::Prod, I8{16}, I8{16}) == I8{0});
    CHECK(run(DataType::Int8, ReduceOp::Prod, I8{-128}, I8{-1}) == I8{-128});
    CHECK(run(DataType::Int8, ReduceOp::Prod, I8{11}, I8{13}) == I8{-113});  // 143 - 256
    CHECK(run(DataType::UInt8, ReduceOp::Sum, U8{255}, U8{1}) == U8{0});
    CHECK(run(DataType::UInt8, ReduceOp::Prod, U8{200}, U8{2}) == U8{144});
    CHECK(run(DataType::UInt8, ReduceOp::Max, U8{200}, U8{2}) == U8{200});
    CHECK(run(DataType::Int32, ReduceOp::Sum, std::numeric_limits<I32>::max(), I32{1}) ==
          std::numeric_limits<I32>::min());
    CHECK(run(DataType::Int32, ReduceOp::Prod, I32{65536}, I32{65536}) == I32{0});
    CHECK(run(DataType::Int32, ReduceOp::Prod, std::numeric_limits<I32>::min(), I32{-1}) ==
          std::numeric_limits<I32>::min());
    CHECK(run(DataType::Int32, ReduceOp::Min, I32{-5}, I32{3}) == I32{-5});
    CHECK(run(DataType::Int64, ReduceOp::Sum, std::numeric_limits<I64>::max(), I64{1}) ==
          std::numeric_limits<I64>::min());
    CHECK(run(DataType::Int64, ReduceOp::Prod, I64{1} << 32, I64{1} << 32) == I64{0});
    CHECK(run(DataType::Int64, ReduceOp::Prod, std::numeric_limits<I64>::min(), I64{-1}) ==
          std::numeric_limits<I64>::min());
    CHECK(run(DataType::Int64, ReduceOp::Prod, I64{3037000500}, I64{3037000500}) ==
          I64{-9223372036709301616});
    CHECK(run(DataType::Int64, ReduceOp::Max, std::numeric_limits<I64>::min(), I64{-1}) == I64{-1});
  }
}

TEST_CASE("reduce kernels: 16-bit rounding inside the kernels", "[reduce]") {
  for (const char* isa : isas()) {
    INFO("isa=" << isa);
    auto sum16 = [&](DataType d, ReduceOp op, std::uint16_t x, std::uint16_t y) {
      std::vector<std::uint16_t> a(17, x), b(17, y), out(17);  // vector body + tail
      concord::detail::reduce_kernel_from(isa, d, op)(out.data(), a.data(), b.data(), 17);
      for (std::uint16_t v : out) CHECK(v == out[0]);
      return out[0];
    };
    const auto H = DataType::Float16;
    const auto B = DataType::BFloat16;
    // 2048 + 1 = 2049: tie between 2048 (even) and 2050 -> 2048.
    CHECK(sum16(H, ReduceOp::Sum, 0x6800, 0x3c00) == 0x6800);
    // 2050 + 1 = 2051: tie between 2050 (odd) and 2052 (even) -> 2052.
    CHECK(sum16(H, ReduceOp::Sum, 0x6801, 0x3c00) == 0x6802);
    // 65504 + 16 = 65520: tie, rounds to inf; 65504 + 8 stays.
    CHECK(sum16(H, ReduceOp::Sum, 0x7bff, 0x4c00) == 0x7c00);
    CHECK(sum16(H, ReduceOp::Sum, 0x7bff, 0x4800) == 0x7bff);
    CHECK(sum16(H, ReduceOp::Prod, 0x5c00, 0x5c00) == 0x7c00);  // 256^2 overflows
    CHECK(sum16(H, ReduceOp::Prod, 0x5bff, 0x5bff) == 0x7bfe);  // 255.875^2 -> 65472
    // Subnormals: 2^-24 + 2^-24 = 2^-23; smallest normal - smallest subnormal.
    CHECK(sum16(H, ReduceOp::Sum, 0x0001, 0x0001) == 0x0002);
    CHECK(sum16(H, ReduceOp::Sum, 0x0400, 0x8001) == 0x03ff);
    CHECK(sum16(H, ReduceOp::Prod, 0x0200, 0x3800) == 0x0100);  // 2^-15 * 0.5
    CHECK(sum16(H, ReduceOp::Prod, 0x0001, 0x3800) == 0x0000);  // 2^-25: tie -> 0
    CHECK(sum16(H, ReduceOp::Prod, 0x0003, 0x3800) == 0x0002);  // 1.5 ulp -> 2
    // inf - inf = NaN; NaN + x = NaN.
    CHECK((sum16(H, ReduceOp::Sum, 0x7c00, 0xfc00) & 0x7fff) > 0x7c00);
    CHECK((sum16(H, ReduceOp::Avg, 0x7e00, 0x3c00) & 0x7fff) > 0x7c00);
    // bfloat16: 1 + 2^-8 is a tie between 1 (even) and 1 + 2^-7 -> 1.
    CHECK(sum16(B, ReduceOp::Sum, 0x3f80, 0x3b80) == 0x3f80);
    CHECK(sum16(B, ReduceOp::Sum, 0x3f81, 0x3b80) == 0x3f82);
    CHECK(sum16(B, ReduceOp::Sum, 0x7f7f, 0x7f7f) == 0x7f80);  // overflow
    CHECK(sum16(B, ReduceOp::Sum, 0x0001, 0x0001) == 0x0002);  // subnormals
    CHECK((sum16(B, ReduceOp::Sum, 0x7f80, 0xff80) & 0x7fff) > 0x7f80);
    CHECK(sum16(B, ReduceOp::Avg, 0x3f80, 0x3f80) == 0x4000);  // Avg reduces as Sum
  }
}

TEST_CASE("reduce kernels: Avg reduces exactly as Sum", "[reduce]") {
  std::mt19937_64 rng(5);
  for (const char* isa : isas()) {
    for (DataType d :
         {DataType::Float16, DataType::BFloat16, DataType::Float32, DataType::Float64}) {
      INFO("isa=" << isa << " " << type_name(d));
      const ReduceFn sum = concord::detail::reduce_kernel_from(isa, d, ReduceOp::Sum);
      const ReduceFn avg = concord::detail::reduce_kernel_from(isa, d, ReduceOp::Avg);
      with_type(d, [&]<class T>() {
        const auto a = random_vector<T>(d, 1000, rng, false);
        const auto b = random_vector<T>(d, 1000, rng, false);
        std::vector<T> s(1000), v(1000);
        sum(s.data(), a.data(), b.data(), 1000);
        avg(v.data(), a.data(), b.data(), 1000);
        CHECK(std::memcmp(s.data(), v.data(), 1000 * sizeof(T)) == 0);
      });
    }
  }
}

namespace {

template <class T>
T ref_scale(DataType d, T x, double factor) {
  if constexpr (std::is_same_v<T, float>) {
    return x * static_cast<float>(factor);
  } else if constexpr (std::is_same_v<T, double>) {
    return x * factor;
  } else {
    const float f = static_cast<float>(factor);
    return d == DataType::Float16 ? Half::narrow(Half::widen(x) * f)
                                  : BF16::narrow(BF16::widen(x) * f);
  }
}

template <class T>
void check_scale(DataType d, ScaleFn fn, std::size_t count, double factor, std::mt19937_64& rng) {
  std::vector<T> buf = random_vector<T>(d, count + 2 * kGuard, rng, true);
  const std::vector<T> before = buf;
  fn(buf.data() + kGuard, count, factor);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < buf.size(); ++i) {
    const bool inside = i >= kGuard && i < kGuard + count;
    const T want = inside ? ref_scale(d, before[i], factor) : before[i];
    if (bits64(want) != bits64(buf[i]) &&
        !(inside && is_nan_value(d, want) && is_nan_value(d, buf[i]))) {
      ++bad;
    }
  }
  INFO(type_name(d) << " count=" << count << " factor=" << factor);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("scale: every table and float type against the reference", "[reduce]") {
  std::mt19937_64 rng(777);
  const DataType floats[] = {DataType::Float16, DataType::BFloat16, DataType::Float32,
                             DataType::Float64};
  for (const char* isa : isas()) {
    INFO("isa=" << isa);
    for (DataType d : {DataType::Int8, DataType::UInt8, DataType::Int32, DataType::Int64}) {
      CHECK(concord::detail::scale_kernel_from(isa, d) == nullptr);
    }
    for (DataType d : floats) {
      const ScaleFn fn = concord::detail::scale_kernel_from(isa, d);
      REQUIRE(fn != nullptr);
      with_type(d, [&]<class T>() {
        for (std::size_t count : kCounts) {
          for (double factor : {0.5, 1.0 / 3.0, 0.125, 1.0 / 7.0, 3.0, 1e-6, 1e30}) {
            check_scale<T>(d, fn, count, factor, rng);
          }
        }
      });
    }
  }
  // The public entry point (whichever table is active).
  for (DataType d : floats) {
    with_type(d, [&]<class T>() {
      std::vector<T> buf = random_vector<T>(d, 1000, rng, false);
      std::vector<T> want(buf.size());
      for (std::size_t i = 0; i < buf.size(); ++i) want[i] = ref_scale(d, buf[i], 0.25);
      concord::detail::scale(buf.data(), buf.size(), d, 0.25);
      INFO(type_name(d));
      CHECK(std::memcmp(buf.data(), want.data(), buf.size() * sizeof(T)) == 0);
    });
  }
  // fp16: 3 * float(1/3) = 1.00000003, which rounds to exactly 1.
  std::uint16_t three = 0x4200;
  concord::detail::scale(&three, 1, DataType::Float16, 1.0 / 3.0);
  CHECK(three == 0x3c00);
}

TEST_CASE("reduce kernels: public entry points", "[reduce]") {
  const std::string isa = concord::detail::reduce_isa();
  const char* forced = std::getenv("CONCORD_REDUCE_ISA");
  if (forced != nullptr && std::string(forced) == "generic") {
    CHECK(isa == "generic");
  } else {
    CHECK(isa == (concord::detail::reduce_isa_available("avx2") ? "avx2" : "generic"));
  }
  CHECK(concord::detail::reduce_isa_available("generic"));
  CHECK_FALSE(concord::detail::reduce_isa_available("avx512"));
  CHECK_FALSE(concord::detail::reduce_isa_available(nullptr));
  CHECK(concord::detail::reduce_kernel_from("nope", DataType::Float32, ReduceOp::Sum) == nullptr);
  for (DataType d : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      INFO(type_name(d) << " " << op_name(op));
      const ReduceFn fn = concord::detail::reduce_kernel(d, op);
      CHECK((fn != nullptr) == concord::is_supported(d, op));
      CHECK(fn == concord::detail::reduce_kernel_from(isa.c_str(), d, op));
    }
  }
  // A count of zero touches nothing, even through null pointers.
  concord::detail::reduce_kernel(DataType::Float32, ReduceOp::Sum)(nullptr, nullptr, nullptr, 0);
  // Smoke test through the public entry point.
  std::vector<float> a{1.0f, 2.0f, -0.0f}, b{0.5f, -2.0f, 0.0f};
  concord::detail::reduce_kernel(DataType::Float32, ReduceOp::Min)(a.data(), a.data(), b.data(),
                                                                   a.size());
  CHECK(a[0] == 0.5f);
  CHECK(a[1] == -2.0f);
  CHECK(std::signbit(a[2]));
}

#if defined(__x86_64__)
TEST_CASE("reduce kernels: Float16 results ignore MXCSR flush-to-zero / denormals-are-zero",
          "[reduce]") {
  // Half subnormals are normal floats, and so are all float intermediates of the
  // Float16 kernels, so FTZ/DAZ (set by e.g. -ffast-math or
  // torch.set_flush_denormal) must not change a single bit.
  std::mt19937_64 rng(8);
  const std::size_t n = 4099;
  std::vector<std::uint16_t> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Mostly subnormals and tiny normals, some anything.
    const auto r = rng();
    a[i] = (r & 3) ? static_cast<std::uint16_t>(r & 0x87ff) : static_cast<std::uint16_t>(r >> 8);
    b[i] = (r & 12) ? static_cast<std::uint16_t>((r >> 24) & 0x87ff)
                    : static_cast<std::uint16_t>(r >> 40);
  }
  for (const char* isa : isas()) {
    INFO("isa=" << isa);
    for (ReduceOp op : kAllOps) {
      INFO(op_name(op));
      const ReduceFn fn = concord::detail::reduce_kernel_from(isa, DataType::Float16, op);
      std::vector<std::uint16_t> normal(n), flushed(n);
      fn(normal.data(), a.data(), b.data(), n);
      const unsigned csr = _mm_getcsr();
      _mm_setcsr(csr | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
      fn(flushed.data(), a.data(), b.data(), n);
      _mm_setcsr(csr);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (normal[i] != flushed[i] && !(Half::is_nan(normal[i]) && Half::is_nan(flushed[i]))) {
          ++differ;
        }
      }
      CHECK(differ == 0);
    }
    std::vector<std::uint16_t> normal = a, flushed = a;
    const ScaleFn scale_fn = concord::detail::scale_kernel_from(isa, DataType::Float16);
    scale_fn(normal.data(), n, 0.75);
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    scale_fn(flushed.data(), n, 0.75);
    _mm_setcsr(csr);
    CHECK(normal == flushed);
  }
}
#endif
