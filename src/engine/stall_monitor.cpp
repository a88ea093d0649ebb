#include "engine/stall_monitor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace concord::detail {
namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

std::string missing_ranks(const std::vector<bool>& have) {
  std::vector<int> missing;
  for (std::size_t r = 0; r < have.size(); ++r) {
    if (!have[r]) missing.push_back(static_cast<int>(r));
  }
  return fmt::format("{}", missing);
}

StallMonitor::StallMonitor(int rank, StallPolicy policy)
    : rank_(rank), decides_(rank == 0), policy_(policy) {}

bool StallMonitor::take_diagnose_request() {
  return std::exchange(diagnose_next_, false);
}

std::vector<std::size_t> StallMonitor::take_ids_to_fail() {
  return std::exchange(ids_to_fail_, {});
}

std::vector<std::string> StallMonitor::take_names_to_fail() {
  return std::exchange(names_to_fail_, {});
}

bool StallMonitor::timeout_due(double waited_s) const {
  return policy_.timeout_s > 0 && waited_s >= policy_.timeout_s;
}

void StallMonitor::warn(const std::string& name, double waited_s,
                        const std::string& missing) const {
  fmt::print(stderr,
             "concord: rank 0: engine: tensor '{}' has waited {:.0f} s: ranks {} have not "
             "submitted it (CONCORD_STALL_WARNING_S)\n",
             name, waited_s, missing);
}

Error StallMonitor::timeout(const std::string& name, const std::string& missing) const {
  return Error(ErrorCode::Timeout, rank_,
               fmt::format("tensor '{}': ranks {} did not submit it within {} s "
                           "(CONCORD_STALL_TIMEOUT_S)",
                           name, missing, policy_.timeout_s));
}

void StallMonitor::diagnosed(std::size_t id, const std::string& name,
                             const std::vector<bool>& have) {
  const std::string& missing = missing_by_id_[id] = missing_ranks(have);
  // The warning waits for a diagnosis: only then are the missing ranks known.
  auto watch = id_clocks_.find(id);
  if (watch == id_clocks_.end() || watch->second.warned) return;
  const double waited = seconds_since(watch->second.first_seen);
  if (waited < policy_.warning_s) return;
  watch->second.warned = true;
  warn(name, waited, missing);
}

void StallMonitor::id_pending(std::size_t id) {
  if (!decides_) return;
  auto [watch, inserted] = id_clocks_.try_emplace(id, Watch{Clock::now(), false});
  const double waited = seconds_since(watch->second.first_seen);
  // A warning or a timeout needs the missing ranks: ask for a diagnosis.
  if (!watch->second.warned && waited >= policy_.warning_s) diagnose_next_ = true;
  if (timeout_due(waited)) {
    ids_to_fail_.push_back(id);
    diagnose_next_ = true;
  }
}

Error StallMonitor::id_timeout(std::size_t id, const std::string& name) const {
  auto missing = missing_by_id_.find(id);
  return timeout(name, missing != missing_by_id_.end() ? missing->second : "?");
}

void StallMonitor::watch_names(const std::vector<AnnouncedName>& names) {
  if (!decides_) return;
  std::unordered_map<std::uint64_t, Watch> still;
  for (const AnnouncedName& entry : names) {
    auto known = name_clocks_.find(entry.order);
    Watch watch = known != name_clocks_.end() ? known->second : Watch{Clock::now(), false};
    const double waited = seconds_since(watch.first_seen);
    if (!watch.warned && waited >= policy_.warning_s) {
      watch.warned = true;
      warn(entry.name, waited, missing_ranks(entry.have));
    }
    if (timeout_due(waited) && std::find(names_to_fail_.begin(), names_to_fail_.end(),
                                         entry.name) == names_to_fail_.end()) {
      names_to_fail_.push_back(entry.name);
    }
    still.emplace(entry.order, watch);
  }
  name_clocks_ = std::move(still);
}

Error StallMonitor::name_timeout(const std::string& name, const std::vector<bool>& have) const {
  return timeout(name, missing_ranks(have));
}

}  // namespace concord::detail
