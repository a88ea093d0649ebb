#include <catch2/catch.hpp>

#include "collectives/block_partition.hpp"
#include "collectives/power_of_two_group.hpp"

#include <set>

using concord::detail::BlockPartition;
using concord::detail::PowerOfTwoGroup;

TEST_CASE("blocks tile the range and differ by at most one element", "[partition]") {
  for (std::size_t count : {0, 1, 5, 7, 64, 1001}) {
    for (std::size_t parts : {1, 2, 3, 8, 13}) {
      BlockPartition b(count, parts);
      std::size_t total = 0;
      for (std::size_t i = 0; i < parts; ++i) {
        CHECK(b.offset(i) == total);
        CHECK(b.size(i) + 1 >= count / parts);
        CHECK(b.size(i) <= count / parts + 1);
        total += b.size(i);
      }
      CHECK(total == count);
      CHECK(b.offset(parts) == count);
      CHECK(b.span(0, parts) == count);
    }
  }
}

TEST_CASE("the power-of-two fold pairs ranks and maps group ranks back", "[partition]") {
  for (int size : {1, 2, 3, 5, 6, 7, 8, 12}) {
    std::set<int> members;
    for (int rank = 0; rank < size; ++rank) {
      PowerOfTwoGroup g(rank, size);
      CHECK((g.pof2() <= size && g.pof2() * 2 > size));
      if (g.participates()) {
        CHECK(g.real_rank(g.new_rank()) == rank);
        members.insert(g.new_rank());
      } else {
        CHECK(g.folds_out());
        PowerOfTwoGroup partner(g.fold_partner(), size);
        CHECK(partner.folds_in());
        CHECK(partner.fold_partner() == rank);
      }
    }
    CHECK(static_cast<int>(members.size()) == PowerOfTwoGroup(0, size).pof2());
  }
}
