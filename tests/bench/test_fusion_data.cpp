// The fusion benchmark's check (bench/fusion/fusion_data.hpp): its reference
// pattern must tell data apart that landed at the wrong place, as the check's
// comment promises, or a fused engine that misplaced a tensor would "validate".
#include <catch2/catch.hpp>

#include "fusion/fusion_data.hpp"

#include <cstddef>
#include <set>
#include <vector>

using concord::DataType;
using concord::bench::kPeriod;
using concord::bench::Tape;
using concord::bench::value_at;

TEST_CASE("the fusion check's pattern has no period shorter than its own", "[bench]") {
  // A shift by s elements goes unnoticed only if every element equals the one s
  // away; with the pattern's period kPeriod, no shift 0 < s < kPeriod may do so.
  for (std::size_t s = 1; s < kPeriod; ++s) {
    bool differs = false;
    for (std::size_t j = 0; j < kPeriod && !differs; ++j) {
      differs = value_at(j) != value_at(j + s);
    }
    INFO("shift " << s);
    REQUIRE(differs);
  }
}

TEST_CASE("the fusion check's values stay small integers", "[bench]") {
  // Sums over up to 64 ranks stay exact in bfloat16 (fusion_data.hpp says why).
  std::set<double> seen;
  for (std::size_t j = 0; j < 2 * kPeriod; ++j) {
    const double v = value_at(j);
    REQUIRE(v >= -4.0);
    REQUIRE(v <= 4.0);
    REQUIRE(v == static_cast<double>(static_cast<int>(v)));
    seen.insert(v);
  }
  REQUIRE(seen.size() == 9);  // every value used: the pattern carries information
}

TEST_CASE("a tensor shifted by a few elements fails the check", "[bench]") {
  const Tape tape(DataType::Float32, [](std::size_t j) { return value_at(j); });
  const std::size_t n = 500, phase = 31;  // a tensor shorter than the period
  std::vector<float> tensor(n);
  for (std::size_t shift : {1, 3, 9, 18, 27}) {
    tape.fill(reinterpret_cast<std::byte*>(tensor.data()), n, phase + shift);
    INFO("shift " << shift);
    REQUIRE(tape.mismatch(reinterpret_cast<const std::byte*>(tensor.data()), n, phase) < n);
  }
  tape.fill(reinterpret_cast<std::byte*>(tensor.data()), n, phase);
  REQUIRE(tape.mismatch(reinterpret_cast<const std::byte*>(tensor.data()), n, phase) == n);
}
