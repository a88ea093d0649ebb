// The per-element operations of the CUDA kernels (src/reduce/cuda_element_ops.cuh),
// compiled here by the host compiler, against the host kernel tables bit for bit:
// every dtype x op and every scale, on exhaustive 8-bit pairs, every 16-bit value
// against special and random partners, and special (±0, ±inf, NaNs with payloads,
// quiet and signalling, subnormals, extremes) and random float/double/integer pairs.
// This is the check of the device arithmetic that runs without a GPU: the functors
// are the same source the kernels compile, through the same dtype x op dispatch.
// (What it cannot see: the device-only branches, __fadd_rn & co. and the hardware
// Float16 conversions, whose non-NaN results IEEE fixes; tests/gpu covers them.)
#include "reduce/cuda_element_ops.cuh"
#include "reduce/reduce_tables.hpp"
#include "unit/element_types.hpp"

#include <concord/types.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <ios>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace {

using concord::DataType;
using concord::ReduceOp;
using concord::detail::ReduceFn;
using concord::detail::ScaleFn;
namespace ops = concord::detail::cuda::ops;
using concord::test::bitcast;
using concord::test::bits64;
using concord::test::kAllOps;
using concord::test::kAllTypes;
using concord::test::with_element_type;

constexpr DataType kFloatTypes[] = {DataType::Float16, DataType::BFloat16, DataType::Float32,
                                    DataType::Float64};

std::vector<const char*> isas() {
  std::vector<const char*> out{"generic"};
  if (concord::detail::reduce_isa_available("avx2")) out.push_back("avx2");
  return out;
}

// ---- inputs -------------------------------------------------------------------------

template <class T>
std::vector<T> special_values(DataType d) {
  std::vector<T> v;
  if constexpr (std::is_floating_point_v<T>) {
    using L = std::numeric_limits<T>;
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const auto nan_bits = [](std::uint64_t b32) {
      // A 32-bit NaN pattern, or the double with its sign, quiet bit and payload.
      if constexpr (sizeof(T) == 4) {
        return bitcast<T>(static_cast<Bits>(b32));
      } else {
        const std::uint64_t sign = (b32 >> 31) << 63;
        const std::uint64_t mant = (b32 & 0x7fffffu) << 29;
        return bitcast<T>(sign | 0x7ff0000000000000u | mant | (mant == 0 ? 1u : 0u));
      }
    };
    v = {T(0.0),
         T(-0.0),
         T(1.0),
         T(-1.0),
         T(1.5),
         T(-2.0),
         T(3.0),
         T(1.0) / T(3.0),
         T(0.1),
         L::infinity(),
         -L::infinity(),
         L::max(),
         L::lowest(),
         L::min(),
         -L::min(),
         L::denorm_min(),
         -L::denorm_min(),
         L::min() - L::denorm_min(),  // largest subnormal
         T(0.5) * L::min(),
         L::epsilon(),
         nan_bits(0x7fc00000u),   // quiet, no payload
         nan_bits(0xffc00000u),   // negative quiet (x86's default NaN)
         nan_bits(0x7fc12345u),   // quiet with payload
         nan_bits(0xffe54321u),   // negative quiet with payload
         nan_bits(0x7f800001u),   // signalling, smallest payload
         nan_bits(0x7fa00000u),   // signalling, top payload bit
         nan_bits(0xff812345u),   // negative signalling
         nan_bits(0x7fffffffu)};  // all ones (the GPU's canonical NaN)
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    if (d == DataType::Float16) {
      v = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3e00, 0xc000, 0x3555, 0x7c00, 0xfc00, 0x7bff,
           0xfbff, 0x0400, 0x8400, 0x0001, 0x8001, 0x03ff, 0x0200, 0x7e00, 0xfe00, 0x7e55,
           0xff21, 0x7c01, 0x7d00, 0xfc33, 0x7fff, 0x6800, 0x5bff, 0x1400};
    } else {
      v = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x3fc0, 0xc000, 0x3eab, 0x7f80, 0xff80, 0x7f7f,
           0xff7f, 0x0080, 0x8080, 0x0001, 0x8001, 0x007f, 0x0040, 0x7fc0, 0xffc0, 0x7fd5,
           0xffe1, 0x7f81, 0x7fa0, 0xff93, 0x7fff, 0x4b00, 0x3b80, 0x2000};
    }
  } else {
    using L = std::numeric_limits<T>;
    v = {T(0),
         T(1),
         T(2),
         T(3),
         static_cast<T>(-1),
         static_cast<T>(-2),
         L::max(),
         L::min(),
         static_cast<T>(L::max() - 1),
         static_cast<T>(L::min() + 1),
         static_cast<T>(L::max() / 2 + 1),
         static_cast<T>(0x55),
         static_cast<T>(16),
         static_cast<T>(-128)};
  }
  return v;
}

template <class T>
T random_value(std::mt19937_64& rng) {
  const std::uint64_t r = rng();
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    if ((r >> 62) == 0) {  // moderate values: sums and products round
      return static_cast<T>((static_cast<double>(r & 0xffffffffffffu) / 0x1p48 - 0.5) * 2000.0);
    }
    if ((r >> 61) == 2) {  // tiny values: subnormal results
      const Bits tiny = static_cast<Bits>(r) & (sizeof(T) == 4 ? 0x80ffffffu : 0x801fffffffffffffu);
      return bitcast<T>(tiny);
    }
    return bitcast<T>(static_cast<Bits>(r));  // any bits, any exponent, NaNs too
  } else {
    return static_cast<T>(r);
  }
}

// Operand pairs: every special with every special, then `random` random pairs and
// random values against specials.
template <class T>
void make_pairs(DataType d, std::size_t random, std::mt19937_64& rng, std::vector<T>& a,
                std::vector<T>& b) {
  const std::vector<T> s = special_values<T>(d);
  for (T x : s) {
    for (T y : s) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  for (std::size_t i = 0; i < random; ++i) {
    const T r = random_value<T>(rng);
    a.push_back(random_value<T>(rng));
    b.push_back(r);
    a.push_back(r);
    b.push_back(s[i % s.size()]);
    a.push_back(s[(i * 7) % s.size()]);
    b.push_back(random_value<T>(rng));
  }
}

// Every value of an 8-bit type with every other; every 16-bit value with each
// special and with random partners, both ways round.
template <class T>
void make_exhaustive_pairs(DataType d, std::mt19937_64& rng, std::vector<T>& a, std::vector<T>& b) {
  if constexpr (sizeof(T) == 1) {
    for (unsigned x = 0; x < 256; ++x) {
      for (unsigned y = 0; y < 256; ++y) {
        a.push_back(static_cast<T>(x));
        b.push_back(static_cast<T>(y));
      }
    }
  } else if constexpr (sizeof(T) == 2) {
    std::vector<T> partners = special_values<T>(d);
    for (int i = 0; i < 8; ++i) partners.push_back(static_cast<T>(rng()));
    for (unsigned x = 0; x < 65536; ++x) {
      for (T y : partners) {
        a.push_back(static_cast<T>(x));
        b.push_back(y);
        a.push_back(y);
        b.push_back(static_cast<T>(x));
      }
      a.push_back(static_cast<T>(x));  // and one random partner each
      b.push_back(static_cast<T>(rng()));
    }
  }
}

// NaN test and quieting on a value of dtype d (16-bit floats as bits).
template <class T>
bool is_nan_value(DataType d, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    if (d == DataType::Float16) return (v & 0x7fff) > 0x7c00;
    if (d == DataType::BFloat16) return (v & 0x7fff) > 0x7f80;
  }
  return false;
}
template <class T>
T quieted(DataType d, T v) {
  if constexpr (std::is_same_v<T, float>) {
    return bitcast<float>(bitcast<std::uint32_t>(v) | 0x00400000u);
  } else if constexpr (std::is_same_v<T, double>) {
    return bitcast<double>(bitcast<std::uint64_t>(v) | 0x0008000000000000u);
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    return static_cast<T>(v | (d == DataType::Float16 ? 0x0200 : 0x0040));
  } else {
    return v;
  }
}

// Where both operands of a floating-point add or multiply are NaN, the host
// returns one of them made quiet, but which one depends on the code path (the
// compiler orders the operands of a commutative operation as it likes: the host
// tables' vector body and scalar tail disagree). The functors always return x's;
// accept that where the host returned y's, and count it.
template <class T>
bool both_nan_other_choice(DataType d, T x, T y, T want, T got) {
  return is_nan_value(d, x) && is_nan_value(d, y) && bits64(got) == bits64(quieted(d, x)) &&
         bits64(want) == bits64(quieted(d, y));
}

template <class T>
std::string describe(std::size_t i, T x, T y, T want, T got) {
  std::ostringstream s;
  s << std::hex << "element " << std::dec << i << std::hex << ": 0x" << bits64(x) << " op 0x"
    << bits64(y) << ": host 0x" << bits64(want) << ", functor 0x" << bits64(got);
  return s.str();
}

// The functor for (d, op) applied element by element, as a kernel applies it.
template <class T>
std::vector<T> apply_functor(DataType d, ReduceOp op, const std::vector<T>& a,
                             const std::vector<T>& b) {
  std::vector<T> out(a.size());
  const bool supported = ops::visit_reduce_op(d, op, [&](auto f) {
    using F = decltype(f);
    if constexpr (std::is_same_v<typename F::value_type, T>) {
      for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
    } else {
      FAIL("functor element type does not match the dtype");
    }
  });
  REQUIRE(supported);
  return out;
}

// The host kernel on (a, b), in every aliasing arrangement the kernels allow
// (distinct, dst == a, dst == b: each is its own loop there), and element by
// element (count 1: the scalar tail code); all must give the same bits.
template <class T>
std::vector<std::vector<T>> apply_host(ReduceFn fn, const std::vector<T>& a,
                                       const std::vector<T>& b, bool per_element) {
  const std::size_t n = a.size();
  std::vector<std::vector<T>> results;
  std::vector<T> out(n);
  fn(out.data(), a.data(), b.data(), n);
  results.push_back(out);
  std::vector<T> in_a = a;
  fn(in_a.data(), in_a.data(), b.data(), n);
  results.push_back(in_a);
  std::vector<T> in_b = b;
  fn(in_b.data(), a.data(), in_b.data(), n);
  results.push_back(in_b);
  if (per_element) {
    std::vector<T> one(n);
    for (std::size_t i = 0; i < n; ++i) fn(&one[i], &a[i], &b[i], 1);
    results.push_back(one);
  }
  return results;
}

template <class T>
void check_reduce(DataType d, ReduceOp op, const char* isa, const std::vector<T>& a,
                  const std::vector<T>& b, bool per_element) {
  const ReduceFn fn = concord::detail::reduce_kernel_from(isa, d, op);
  REQUIRE(fn != nullptr);
  const std::vector<T> got = apply_functor(d, op, a, b);
  const char* const arrangement[] = {"dst distinct", "dst == a", "dst == b", "one by one"};
  const auto host = apply_host(fn, a, b, per_element);
  for (std::size_t k = 0; k < host.size(); ++k) {
    const std::vector<T>& want = host[k];
    const bool arithmetic = concord::is_floating_point(d) &&
                            (op == ReduceOp::Sum || op == ReduceOp::Prod || op == ReduceOp::Avg);
    std::size_t bad = 0;
    std::size_t other_nan = 0;
    std::vector<std::string> first;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (bits64(want[i]) == bits64(got[i])) continue;
      if (arithmetic && both_nan_other_choice(d, a[i], b[i], want[i], got[i])) {
        ++other_nan;
      } else if (bad++ < 5) {
        first.push_back(describe(i, a[i], b[i], want[i], got[i]));
      }
    }
    INFO("isa " << isa << ", " << concord::to_string(d) << " " << concord::to_string(op) << ", "
                << a.size() << " pairs, host " << arrangement[k] << ", " << other_nan
                << " NaN + NaN pairs where the host returned y's NaN");
    CAPTURE(first);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("cuda element ops: reduce functors match the host tables bit for bit",
          "[cuda_element_ops]") {
  std::mt19937_64 rng(20240611);
  for (const char* isa : isas()) {
    for (DataType d : kAllTypes) {
      for (ReduceOp op : kAllOps) {
        if (!concord::is_supported(d, op)) continue;
        with_element_type(d, [&]<class T>() {
          std::vector<T> a, b;
          make_pairs<T>(d, 20000, rng, a, b);
          check_reduce<T>(d, op, isa, a, b, /*per_element=*/true);
          if constexpr (sizeof(T) <= 2) {
            std::vector<T> xa, xb;
            make_exhaustive_pairs<T>(d, rng, xa, xb);
            check_reduce<T>(d, op, isa, xa, xb, /*per_element=*/false);
          }
        });
      }
    }
  }
}

TEST_CASE("cuda element ops: dispatch covers every dtype x op, Avg as Sum", "[cuda_element_ops]") {
  for (DataType d : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      INFO(concord::to_string(d) << " " << concord::to_string(op));
      int calls = 0;
      std::size_t element_bytes = 0;
      const bool ok = ops::visit_reduce_op(d, op, [&](auto f) {
        ++calls;
        element_bytes = sizeof(typename decltype(f)::value_type);
      });
      CHECK(ok == concord::is_supported(d, op));
      CHECK(calls == (ok ? 1 : 0));
      if (ok) CHECK(element_bytes == concord::size_of(d));
    }
    if (concord::is_floating_point(d)) {
      // One functor type for Sum and Avg: one kernel, not two.
      std::string sum_type, avg_type;
      ops::visit_reduce_op(d, ReduceOp::Sum, [&](auto f) { sum_type = typeid(f).name(); });
      ops::visit_reduce_op(d, ReduceOp::Avg, [&](auto f) { avg_type = typeid(f).name(); });
      CHECK(sum_type == avg_type);
    }
  }
  // Scale: floating-point types only, unless the caller only copies (batched copy).
  for (DataType d : kAllTypes) {
    INFO(concord::to_string(d));
    int calls = 0;
    CHECK(ops::visit_scale_op(d, 0.5, false, [&](auto) { ++calls; }) ==
          concord::is_floating_point(d));
    CHECK(ops::visit_scale_op(d, 1.0, true, [&](auto) { ++calls; }));
    CHECK(calls == (concord::is_floating_point(d) ? 2 : 1));
  }
}

namespace {

template <class T>
void check_scale(DataType d, const char* isa, const std::vector<T>& x, double factor) {
  const ScaleFn fn = concord::detail::scale_kernel_from(isa, d);
  REQUIRE(fn != nullptr);
  std::vector<T> want = x;
  fn(want.data(), want.size(), factor);
  std::vector<T> one = x;  // element by element: the scalar tail code
  for (T& v : one) fn(&v, 1, factor);
  std::vector<T> got(x.size());
  REQUIRE(ops::visit_scale_op(d, factor, false, [&](auto f) {
    using F = decltype(f);
    if constexpr (std::is_same_v<typename F::value_type, T>) {
      for (std::size_t i = 0; i < x.size(); ++i) got[i] = f(x[i]);
    } else {
      FAIL("scale functor element type does not match the dtype");
    }
  }));
  // The factor as the host's multiply sees it: the result for x = 1 when it is NaN.
  T unit = T(1);
  if constexpr (std::is_same_v<T, std::uint16_t>) {
    unit = d == DataType::Float16 ? 0x3c00 : 0x3f80;
  }
  T factor_nan = unit;
  fn(&factor_nan, 1, factor);
  const bool factor_is_nan = is_nan_value(d, factor_nan);
  for (const std::vector<T>* host : {&want, &one}) {
    std::size_t bad = 0;
    std::vector<std::string> first;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (bits64((*host)[i]) == bits64(got[i])) continue;
      // Both NaN: the host may return either (see both_nan_other_choice).
      if (factor_is_nan && both_nan_other_choice(d, x[i], factor_nan, (*host)[i], got[i])) {
        continue;
      }
      if (bad++ < 5) first.push_back(describe(i, x[i], T{}, (*host)[i], got[i]));
    }
    INFO("isa " << isa << ", " << concord::to_string(d) << ", factor " << factor << " (bits 0x"
                << std::hex << bitcast<std::uint64_t>(factor) << std::dec << "), "
                << (host == &want ? "whole buffer" : "one by one"));
    CAPTURE(first);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("cuda element ops: scale functors match the host tables bit for bit",
          "[cuda_element_ops]") {
  std::mt19937_64 rng(77);
  const double factors[] = {0.5,
                            1.0 / 3.0,
                            1.0,
                            -1.0,
                            3.0,
                            0.0,
                            -0.0,
                            1.0 / 7.0,
                            1e-6,
                            1e30,
                            1e300,   // inf in float
                            1e-300,  // 0 in float
                            1e-40,   // a float subnormal
                            5e-324,  // the smallest double subnormal
                            std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            bitcast<double>(std::uint64_t{0x7ff8000000000000}),   // quiet NaN
                            bitcast<double>(std::uint64_t{0xfff8000012345678}),   // with payload
                            bitcast<double>(std::uint64_t{0x7ff4000000000000}),   // signalling
                            bitcast<double>(std::uint64_t{0x7ff0000000000001})};  // signalling
  for (const char* isa : isas()) {
    for (DataType d : kFloatTypes) {
      with_element_type(d, [&]<class T>() {
        std::vector<T> x = special_values<T>(d);
        if constexpr (sizeof(T) == 2) {
          for (unsigned v = 0; v < 65536; ++v) x.push_back(static_cast<T>(v));
        } else {
          for (int i = 0; i < 20000; ++i) x.push_back(random_value<T>(rng));
        }
        for (double factor : factors) check_scale<T>(d, isa, x, factor);
        for (int i = 0; i < 8; ++i) {
          check_scale<T>(d, isa, x, random_value<double>(rng));
        }
      });
    }
  }
}

TEST_CASE("cuda element ops: the host NaN rules, spelled out", "[cuda_element_ops]") {
  // What the functors promise whatever table the host uses: a NaN operand comes
  // back quiet with its payload (x's when both are NaN, on x86-64); an invalid
  // operation gives the CPU's default NaN.
  const float qnan_payload = bitcast<float>(std::uint32_t{0x7fc12345});
  const float snan = bitcast<float>(std::uint32_t{0xff812345});
  const float inf = std::numeric_limits<float>::infinity();
  const ops::FloatSum<float> sum;
  const ops::FloatProd<float> prod;
  CHECK(bitcast<std::uint32_t>(sum(qnan_payload, 1.0f)) == 0x7fc12345u);
  CHECK(bitcast<std::uint32_t>(sum(1.0f, snan)) == 0xffc12345u);
  CHECK(bitcast<std::uint32_t>(sum(inf, -inf)) == ops::kDefaultNaN32);
  CHECK(bitcast<std::uint32_t>(prod(0.0f, inf)) == ops::kDefaultNaN32);
#if defined(__x86_64__)
  CHECK(ops::kDefaultNaN32 == 0xffc00000u);
  CHECK(bitcast<std::uint32_t>(sum(qnan_payload, snan)) == 0x7fc12345u);
  CHECK(bitcast<std::uint32_t>(sum(snan, qnan_payload)) == 0xffc12345u);
#endif
  // Float16: the operand NaN, quiet; inf - inf: the default NaN narrowed.
  const ops::Sum16<ops::Half16> hsum;
  CHECK(hsum(0x7c01, 0x3c00) == 0x7e01);
  CHECK(hsum(0x3c00, 0xfd55) == 0xff55);
  CHECK(hsum(0x7c00, 0xfc00) == ops::Half16::kDefaultNaN);
  CHECK(ops::Half16::kDefaultNaN ==
        concord::detail::float_to_half(bitcast<float>(std::uint32_t{ops::kDefaultNaN32})));
  // Rounding: 2050 + 1 ties to even 2052; bfloat16 1 + 2^-8 ties to 1.
  CHECK(hsum(0x6801, 0x3c00) == 0x6802);
  CHECK(ops::Sum16<ops::BFloat16_16>{}(0x3f80, 0x3b80) == 0x3f80);
  // Scale: the factor's NaN when only it is NaN; the element's when both are.
  const auto s =
      ops::Scale16<ops::Half16>::make(bitcast<double>(std::uint64_t{0xfff8000012345678}));
  CHECK(s(0x3c00) == 0xfe00);
  CHECK(s(0x7d00) == 0x7f00);
}

TEST_CASE("cuda element ops: NaN results do not depend on the hardware's NaN",
          "[cuda_element_ops]") {
  // A GPU's add and multiply return one canonical NaN (all ones) for any NaN result,
  // where the host's CPU returns an operand's payload or its default NaN. Feed the
  // NaN fix-up that canonical NaN, as the device does, and check it against the
  // host tables on every special pair whose host result is NaN.
  std::mt19937_64 rng(3);
  for (DataType d : kFloatTypes) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod}) {
      with_element_type(d, [&]<class T>() {
        std::vector<T> a, b;
        make_pairs<T>(d, 2000, rng, a, b);
        std::vector<T> want(a.size());
        concord::detail::reduce_kernel_from("generic", d, op)(want.data(), a.data(), b.data(),
                                                              a.size());
        std::size_t nan_results = 0;
        std::size_t bad = 0;
        std::vector<std::string> first;
        for (std::size_t i = 0; i < a.size(); ++i) {
          if (!is_nan_value(d, want[i])) continue;
          ++nan_results;
          T got{};
          if constexpr (std::is_same_v<T, float>) {
            got = ops::host_nan(bitcast<float>(std::uint32_t{0x7fffffff}), a[i], b[i]);
          } else if constexpr (std::is_same_v<T, double>) {
            got = ops::host_nan(bitcast<double>(std::uint64_t{0x7fffffffffffffff}), a[i], b[i]);
          } else {
            const float canonical = bitcast<float>(std::uint32_t{0x7fffffff});
            got = d == DataType::Float16 ? ops::finish16<ops::Half16>(canonical, a[i], b[i])
                                         : ops::finish16<ops::BFloat16_16>(canonical, a[i], b[i]);
          }
          if (bits64(got) != bits64(want[i]) &&
              !both_nan_other_choice(d, a[i], b[i], want[i], got) && bad++ < 5) {
            first.push_back(describe(i, a[i], b[i], want[i], got));
          }
        }
        INFO(concord::to_string(d)
             << " " << concord::to_string(op) << ": " << nan_results << " NaN results");
        CAPTURE(first);
        CHECK(nan_results > 100);
        CHECK(bad == 0);
      });
    }
  }
  // And the scale: x * factor with a canonical-NaN product.
  const float canonical = bitcast<float>(std::uint32_t{0x7fffffff});
  const auto half_inf = ops::Scale16<ops::Half16>::make(std::numeric_limits<double>::infinity());
  CHECK(ops::finish16<ops::Half16>(canonical, 0x0000, half_inf.s16) == ops::Half16::kDefaultNaN);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(bitcast<std::uint32_t>(ops::host_nan(canonical, 0.0f, inf)) == ops::kDefaultNaN32);
  CHECK(bitcast<std::uint32_t>(ops::host_nan(canonical, inf, -inf)) == ops::kDefaultNaN32);
}
