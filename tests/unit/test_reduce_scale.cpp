// The scale kernels and the public entry points of src/reduce against the scalar
// references of reduce_reference.hpp, and Float16 results under MXCSR's
// flush-to-zero and denormals-are-zero.
#include "unit/reduce_reference.hpp"

#include <catch2/catch.hpp>

using namespace reduce_reference;
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
  for (const char* isa : isas()) {
    INFO("isa=" << isa);
    for (DataType d : {DataType::Int8, DataType::UInt8, DataType::Int32, DataType::Int64}) {
      CHECK(concord::detail::scale_kernel_from(isa, d) == nullptr);
    }
    for (DataType d : kFloatTypes) {
      const ScaleFn fn = concord::detail::scale_kernel_from(isa, d);
      REQUIRE(fn != nullptr);
      with_element_type(d, [&]<class T>() {
        for (std::size_t count : kCounts) {
          for (double factor : {0.5, 1.0 / 3.0, 0.125, 1.0 / 7.0, 3.0, 1e-6, 1e30}) {
            check_scale<T>(d, fn, count, factor, rng);
          }
        }
      });
    }
  }
  // The public entry point (whichever table is active).
  for (DataType d : kFloatTypes) {
    with_element_type(d, [&]<class T>() {
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
