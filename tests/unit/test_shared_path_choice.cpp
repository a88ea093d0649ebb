// The measured path choice's state machine (collectives/shared/path_choice.hpp)
// on boards held here, two "ranks" stepped in lockstep with times the test
// chooses: what is explored, what is chosen, and that a new measurement
// replaces the last one.
#include <catch2/catch.hpp>

#include "collectives/shared/path_choice.hpp"

#include <array>
#include <vector>

namespace {

using concord::detail::kMeasurePeriod;
using concord::detail::kSamplesPerPath;
using concord::detail::PathBoard;
using concord::detail::PathPlan;

constexpr std::size_t kBytes = std::size_t{1} << 20;

struct TwoRanks {
  std::array<PathBoard, 2> boards{};
  std::array<const PathBoard*, 2> all{&boards[0], &boards[1]};

  // One message on both ranks; a timed one costs rank r single_us[r] or
  // copy_us[r]. Returns rank 0's path (after checking rank 1 took the same).
  bool step(std::array<double, 2> single_us, std::array<double, 2> copy_us) {
    std::array<PathPlan, 2> plans{};
    for (std::size_t r = 0; r < 2; ++r) plans[r] = plan_path(boards[r], all, kBytes);
    REQUIRE(plans[0].single_copy == plans[1].single_copy);
    for (std::size_t r = 0; r < 2; ++r) {
      record_path(boards[r], plans[r], (plans[r].single_copy ? single_us[r] : copy_us[r]) * 1e-6);
    }
    return plans[0].single_copy;
  }
  bool step(double single_us, double copy_us) {
    return step({single_us, single_us}, {copy_us, copy_us});
  }
};

}  // namespace

TEST_CASE("path choice: explore both, then keep the faster until the next measurement",
          "[path_choice]") {
  TwoRanks ranks;
  std::vector<bool> paths;
  // First measurement: copy is faster; afterwards single copy is.
  for (int m = 0; m < kMeasurePeriod; ++m) paths.push_back(ranks.step(100, 60));
  for (int m = 0; m < kMeasurePeriod; ++m) paths.push_back(ranks.step(100, 300));
  constexpr int kExplore = 2 * kSamplesPerPath;
  for (int start : {0, kMeasurePeriod}) {
    for (int k = 0; k < kExplore; ++k) CHECK(paths[start + k] == (k < kSamplesPerPath));
    CHECK(paths[start + kExplore]);  // while the boards become visible
  }
  for (int m = kExplore + 1; m < kMeasurePeriod; ++m) REQUIRE_FALSE(paths[m]);
  for (int m = kMeasurePeriod + kExplore + 1; m < 2 * kMeasurePeriod; ++m) REQUIRE(paths[m]);
}

TEST_CASE("path choice: every rank follows the sum over the ranks, not its own times",
          "[path_choice]") {
  TwoRanks ranks;
  constexpr int kExplore = 2 * kSamplesPerPath;
  // Rank 0 finds copy faster (100 against 150), rank 1 single copy (100 against
  // 300): summed, single copy (250) beats copy (400), so both take it.
  for (int m = 0; m <= kExplore; ++m) ranks.step({150, 100}, {100, 300});
  CHECK(ranks.step({150, 100}, {100, 300}));
  // And the other way round in a fresh pair: summed, copy (250) beats single copy (600).
  TwoRanks other;
  for (int m = 0; m <= kExplore; ++m) other.step({500, 100}, {100, 150});
  CHECK_FALSE(other.step({500, 100}, {100, 150}));
}

TEST_CASE("path choice: the message after the samples is not timed", "[path_choice]") {
  PathBoard mine{};
  const std::array<const PathBoard*, 1> all{&mine};
  for (int m = 0; m < 2 * kSamplesPerPath; ++m) {
    const PathPlan plan = concord::detail::plan_path(mine, all, kBytes);
    concord::detail::record_path(mine, plan, (plan.single_copy ? 300 : 200) * 1e-6);
  }
  const PathPlan settling = concord::detail::plan_path(mine, all, kBytes);
  CHECK(settling.single_copy);
  CHECK(settling.timed_class == -1);
  concord::detail::record_path(mine, settling, 1e-6);  // would make single copy win if it counted
  CHECK_FALSE(concord::detail::plan_path(mine, all, kBytes).single_copy);
  CHECK(mine.best_us[20][0] == Approx(300));  // 1 MiB: class 20
}

TEST_CASE("path choice: the fastest sample of each path counts, per size class", "[path_choice]") {
  PathBoard mine{};
  const std::array<const PathBoard*, 1> all{&mine};
  // Class of 1 MiB: single copy's samples all 100; copy's 500, 50, 500, 500.
  const std::array<double, 2 * kSamplesPerPath> times{100, 100, 100, 100, 500, 50, 500, 500};
  for (double us : times) {
    const PathPlan plan = concord::detail::plan_path(mine, all, kBytes);
    concord::detail::record_path(mine, plan, us * 1e-6);
  }
  CHECK(concord::detail::plan_path(mine, all, kBytes).single_copy);  // settling
  CHECK_FALSE(concord::detail::plan_path(mine, all, kBytes).single_copy);
  // Another class has measured nothing yet: it starts with single copy.
  CHECK(concord::detail::plan_path(mine, all, 4 * kBytes).single_copy);
}

TEST_CASE("path choice: samples of one class count per byte, not per message", "[path_choice]") {
  PathBoard mine{};
  const std::array<const PathBoard*, 1> all{&mine};
  // Class of 1 MiB (1 to 2 MiB). Single copy's samples are messages of 1.9 MiB in
  // 300 us, the copied rounds' of 1 MiB in 200 us: per byte single copy is faster
  // (158 us a MiB against 200), though each of its messages took longer.
  const std::size_t large = kBytes * 19 / 10;
  for (int m = 0; m < 2 * kSamplesPerPath; ++m) {
    const bool single = m < kSamplesPerPath;
    const PathPlan plan = concord::detail::plan_path(mine, all, single ? large : kBytes);
    REQUIRE(plan.single_copy == single);
    concord::detail::record_path(mine, plan, (single ? 300 : 200) * 1e-6);
  }
  CHECK(mine.best_us[20][0] == Approx(300.0 / 1.9).epsilon(1e-4));
  CHECK(mine.best_us[20][1] == Approx(200));
  CHECK(concord::detail::plan_path(mine, all, kBytes).single_copy);  // settling
  CHECK(concord::detail::plan_path(mine, all, kBytes).single_copy);  // chosen: per byte faster
}

TEST_CASE("path choice: the summed best times of the ranks decide", "[path_choice]") {
  using concord::detail::single_copy_wins;
  CHECK(single_copy_wins(std::vector<float>{100, 100}, std::vector<float>{150, 90}));
  CHECK_FALSE(single_copy_wins(std::vector<float>{100, 100}, std::vector<float>{80, 90}));
  CHECK(single_copy_wins(std::vector<float>{100, 100}, std::vector<float>{100, 100}));  // a tie
  // One rank much slower on single copy outweighs small gains on the others.
  CHECK_FALSE(single_copy_wins(std::vector<float>{50, 50, 400}, std::vector<float>{60, 60, 100}));
  // A rank with no time for a path (not expected): the default, single copy.
  CHECK(single_copy_wins(std::vector<float>{100, 100}, std::vector<float>{0, 10}));
  CHECK(single_copy_wins(std::vector<float>{0, 500}, std::vector<float>{100, 100}));
}
