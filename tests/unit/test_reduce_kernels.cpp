// The reduction kernels (src/reduce), every table this CPU can run, against the
// scalar references of reduce_reference.hpp: every dtype, op, count and aliasing,
// the tables against each other, argument order, signed zeros and NaNs, integer
// wraparound, 16-bit rounding and Avg.
#include "unit/reduce_reference.hpp"

#include <catch2/catch.hpp>

using namespace reduce_reference;

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
        with_element_type(d, [&]<class T>() {
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
      with_element_type(d, [&]<class T>() {
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
        with_element_type(d, [&]<class T>() {
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
    for (DataType d : kFloatTypes) {
      INFO("isa=" << isa << " " << type_name(d));
      const ReduceFn sum = concord::detail::reduce_kernel_from(isa, d, ReduceOp::Sum);
      const ReduceFn avg = concord::detail::reduce_kernel_from(isa, d, ReduceOp::Avg);
      with_element_type(d, [&]<class T>() {
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
