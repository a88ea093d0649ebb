#include <catch2/catch.hpp>

#include "collectives/block_partition.hpp"
#include "collectives/power_of_two_group.hpp"

#include <algorithm>
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

TEST_CASE("blocks in quanta start on quantum boundaries and tile the range", "[partition]") {
  for (std::size_t quantum : {1, 4, 16, 64}) {
    for (std::size_t count : {0, 1, 5, 63, 64, 65, 1001, 4096, 100003}) {
      for (std::size_t parts : {1, 2, 3, 8, 13}) {
        INFO("quantum " << quantum << " count " << count << " parts " << parts);
        BlockPartition b(count, parts, quantum);
        std::size_t total = 0;
        std::size_t largest = 0;
        for (std::size_t i = 0; i < parts; ++i) {
          CHECK(b.offset(i) == total);
          CHECK(b.offset(i) % quantum == 0);
          // Whole quanta, one more for the first blocks; the last also takes the rest.
          const std::size_t units = count / quantum;
          const std::size_t expected_units = units / parts + (i < units % parts ? 1 : 0);
          const std::size_t rest = i + 1 == parts ? count % quantum : 0;
          CHECK(b.size(i) == expected_units * quantum + rest);
          largest = std::max(largest, b.size(i));
          total += b.size(i);
        }
        CHECK(total == count);
        CHECK(b.largest() == largest);
        CHECK(b.offset(parts) == count);
        CHECK(b.size(parts) == 0);
      }
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

TEST_CASE("Rabenseifner's fold in halves: a member's two halves lie in its pair", "[partition]") {
  for (int size : {2, 3, 5, 6, 7, 8, 12, 13}) {
    int pof2 = 1;
    while (pof2 * 2 <= size) pof2 *= 2;
    const int pairs = size - pof2;
    for (int rank = 0; rank < size; ++rank) {
      INFO("size=" << size << " rank=" << rank);
      const PowerOfTwoGroup g(rank, size);
      // The member a rank's data belongs to: a pair's two ranks share one.
      const int expected_member = rank < 2 * pairs ? rank / 2 : rank - pairs;
      CHECK(g.member() == expected_member);
      // A paired member's halves: the odd rank keeps one, the even rank holds the other;
      // an unpaired member holds both.
      CHECK(g.real_rank(g.member()) == (rank < 2 * pairs ? rank | 1 : rank));
      CHECK(g.half_rank(g.member()) == (rank < 2 * pairs ? rank & ~1 : rank));
    }
  }
}
