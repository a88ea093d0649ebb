// The scale functors of the CUDA kernels (src/reduce/cuda_element_ops.cuh),
// compiled here by the host compiler, against the host scale tables bit for bit:
// every float type and table, special and random values, assorted factors. The
// shared inputs: cuda_element_checks.hpp.
#include "unit/cuda_element_checks.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace cuda_element_checks;

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
