// The per-element operations of the CUDA kernels (src/reduce/cuda_element_ops.cuh),
// compiled here by the host compiler, against the host kernel tables bit for bit:
// every dtype x op and every scale, on exhaustive 8-bit pairs, every 16-bit value
// against special and random partners, and special (±0, ±inf, NaNs with payloads,
// quiet and signalling, subnormals, extremes) and random float/double/integer pairs.
// This is the check of the device arithmetic that runs without a GPU: the functors
// are the same source the kernels compile, through the same dtype x op dispatch.
// (What it cannot see: the device-only branches, __fadd_rn & co. and the hardware
// Float16 conversions, whose non-NaN results IEEE fixes; tests/gpu covers them.)
// The shared inputs: cuda_element_checks.hpp; scale: test_cuda_scale_ops.cpp.
#include "unit/cuda_element_checks.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace cuda_element_checks;

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
