#include "collectives/shared/path_choice.hpp"

#include "transport/shared_arena.hpp"

#include <algorithm>
#include <bit>
#include <vector>

namespace concord::detail {
namespace {

enum PathIndex : std::size_t { kSingleCopy = 0, kCopy = 1 };
static_assert(sizeof(PathBoard) <= SharedArena::kBoardBytes);

PathBoard& board_of(const SharedArena& arena, int owner) {
  return *reinterpret_cast<PathBoard*>(arena.board(owner));
}

std::size_t size_class(std::size_t bytes) {
  return std::min<std::size_t>(std::bit_width(bytes) - 1, kPathSizeClasses - 1);
}

// Every rank's best times of class `cls` into one choice, cached on `mine`
// until the next measurement.
bool decide(PathBoard& mine, std::span<const PathBoard* const> boards, std::size_t cls) {
  std::uint8_t& chosen = mine.chosen[cls];
  if (chosen != 0) return chosen == kSingleCopy + 1;
  std::vector<float> single;
  std::vector<float> copy;
  for (const PathBoard* board : boards) {
    single.push_back(board->best_us[cls][kSingleCopy]);
    copy.push_back(board->best_us[cls][kCopy]);
  }
  const bool single_copy = single_copy_wins(single, copy);
  chosen = static_cast<std::uint8_t>((single_copy ? kSingleCopy : kCopy) + 1);
  return single_copy;
}

}  // namespace

bool single_copy_wins(std::span<const float> single_copy_us, std::span<const float> copy_us) {
  // Every rank sums the same floats in the same order: the same answer on all.
  // Any untimed entry (0; not expected after a measurement) leaves single copy,
  // the threshold's choice.
  double single = 0;
  double copy = 0;
  for (float t : single_copy_us) {
    if (t <= 0) return true;
    single += t;
  }
  for (float t : copy_us) {
    if (t <= 0) return true;
    copy += t;
  }
  return copy >= single;
}

PathPlan plan_path(PathBoard& mine, std::span<const PathBoard* const> boards, std::size_t bytes) {
  const std::size_t cls = size_class(bytes);
  const std::uint64_t index = mine.messages[cls]++ % kMeasurePeriod;
  constexpr std::uint64_t kExplore = 2 * kSamplesPerPath;
  if (index == 0) {  // a new measurement: forget the last one
    mine.best_us[cls] = {};
    mine.chosen[cls] = 0;
  }
  // In two runs, single copy first: a path's later samples find its buffers
  // warm, as they are when it is taken message after message.
  if (index < kExplore) return {index < kSamplesPerPath, static_cast<int>(cls), bytes};
  if (index == kExplore) return {};  // the boards become visible during this one
  return {decide(mine, boards, cls), -1};
}

void record_path(PathBoard& mine, const PathPlan& plan, double seconds) {
  if (plan.timed_class < 0) return;
  float& best = mine.best_us[static_cast<std::size_t>(plan.timed_class)]
                            [plan.single_copy ? kSingleCopy : kCopy];
  // Per byte: as the time of a message of the class's smallest size.
  const double per_class_base = plan.bytes == 0
                                    ? 1.0
                                    : static_cast<double>(std::size_t{1} << plan.timed_class) /
                                          static_cast<double>(plan.bytes);
  const auto us = std::max(static_cast<float>(seconds * 1e6 * per_class_base), 1e-3f);
  if (best <= 0 || us < best) best = us;
}

PathPlan plan_large_path(SharedArena& arena, std::size_t bytes, bool measure) {
  if (!measure || arena.board(arena.rank()) == nullptr) return {};
  // Kept per thread, so that an eligible message allocates nothing.
  thread_local std::vector<const PathBoard*> boards;
  boards.clear();
  for (int r = 0; r < arena.size(); ++r) boards.push_back(&board_of(arena, r));
  return plan_path(board_of(arena, arena.rank()), boards, bytes);
}

void record_large_path(SharedArena& arena, const PathPlan& plan, double seconds) {
  if (plan.timed_class >= 0) record_path(board_of(arena, arena.rank()), plan, seconds);
}

}  // namespace concord::detail
