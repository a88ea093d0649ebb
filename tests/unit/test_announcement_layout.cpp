// Where each rank's announcement records lie in the negotiation's one
// MPI_Iallgatherv, whose counts and displacements are ints: sizes that add up to
// more than an int can count fail with an error naming them, on every rank alike
// (each computes it from the same gathered sizes), instead of overflowing.
#include <catch2/catch.hpp>

#include "engine/announcement_layout.hpp"

#include <concord/error.hpp>

#include <climits>
#include <cstdint>
#include <vector>

using concord::Error;
using concord::ErrorCode;
using concord::detail::announcement_layout;

TEST_CASE("announcement layout: each rank's bytes after the ranks before it", "[engine]") {
  const auto layout = announcement_layout({10, 0, 7, 3}, 1);
  CHECK(layout.counts == std::vector<int>{10, 0, 7, 3});
  CHECK(layout.displacements == std::vector<int>{0, 10, 10, 17});
  CHECK(layout.total == 20);
}

TEST_CASE("announcement layout: up to INT_MAX bytes in all", "[engine]") {
  const std::uint64_t max = INT_MAX;
  const auto layout = announcement_layout({max - 5, 5}, 0);
  CHECK(layout.displacements == std::vector<int>{0, INT_MAX - 5});
  CHECK(layout.total == max);
}

TEST_CASE("announcement layout: more than an int can count fails, naming the sizes", "[engine]") {
  const std::uint64_t half = std::uint64_t{1} << 30;  // 1 GiB
  // Together past INT_MAX (the sum overflowed int before), and one rank alone past it
  // (its own count did).
  for (const std::vector<std::uint64_t>& bytes :
       {std::vector<std::uint64_t>{half, half, 1}, std::vector<std::uint64_t>{3, 3 * half}}) {
    try {
      announcement_layout(bytes, 1);
      FAIL("no error");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK(e.rank() == 1);
      using Catch::Matchers::Contains;
      CHECK_THAT(e.what(), Contains("2147483647") && Contains("MPI_Iallgatherv"));
      if (bytes.size() == 3) {
        CHECK_THAT(e.what(), Contains("2147483649 bytes") && Contains("rank 0: 1073741824") &&
                                 Contains("rank 2: 1"));
      } else {
        CHECK_THAT(e.what(), Contains("rank 1: 3221225472"));
      }
    }
  }
}
