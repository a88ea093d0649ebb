// Rank 0's watch over work that some ranks have submitted and others have not,
// and the one place its warning and its timeout error are worded.
//
// Work stalls in two ways: a cached id that is ready on some ranks but not on
// all (the OR of a cycle's ready bits has it, the AND does not), and a name in
// the registry that some ranks have announced and others have not. Only rank 0
// keeps the clocks and decides, so that every rank acts on one decision, sent
// in the next cycle: "diagnose" (everyone's ready bits are gathered, so the
// missing ranks of a cached id can be named) and "fail these ids / names" once
// they waited CONCORD_STALL_TIMEOUT_S. The Negotiator carries the decisions
// (it owns the protocol); every rank's monitor remembers the last diagnosis and
// words the timeout error its handles fail with.
#pragma once

#include "engine/work.hpp"

#include <concord/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace concord::detail {

struct StallPolicy {
  double warning_s = 60;
  double timeout_s = 0;  // 0: never
};

// The ranks whose entry in `have` is false, as "[1, 3]".
std::string missing_ranks(const std::vector<bool>& have);

class StallMonitor {
 public:
  StallMonitor(int rank, StallPolicy policy);

  // Rank 0's requests for the next cycle: taken (and cleared) as it is built.
  bool take_diagnose_request();
  std::vector<std::size_t> take_ids_to_fail();
  // Names to fail travel as announcements: a cycle with some must exchange them.
  bool has_names_to_fail() const { return !names_to_fail_.empty(); }
  std::vector<std::string> take_names_to_fail();

  // Cached ids, after a cycle's bit exchange. `have`: which ranks had `id`
  // ready, from a diagnosis; every rank keeps the missing ranks for
  // id_timeout(), rank 0 warns (once per stall) when it is due.
  void diagnosed(std::size_t id, const std::string& name, const std::vector<bool>& have);
  // Rank 0: `id` is ready somewhere but not everywhere this cycle.
  void id_pending(std::size_t id);
  // `id` ran, failed, or is pending nowhere: its stall (if any) is over.
  // (Its diagnosis goes too, so a later stall of the same id never reuses it.)
  void id_settled(std::size_t id) {
    id_clocks_.erase(id);
    missing_by_id_.erase(id);
  }
  // The error a timed-out cached id fails with, naming the ranks the last
  // diagnosis found missing.
  Error id_timeout(std::size_t id, const std::string& name) const;

  // A name in the registry: `order` is its entry's (unique per entry, so a name
  // announced again after it left the registry starts a new clock); `have`
  // says which ranks announced it.
  struct AnnouncedName {
    std::uint64_t order = 0;
    std::string name;
    std::vector<bool> have;
  };
  // Rank 0, after a cycle's announcements, with the whole registry: warns once
  // per entry, and queues names that timed out; forgets entries not listed. A
  // new entry's clock starts here, at the end of the cycle that registered it.
  void watch_names(const std::vector<AnnouncedName>& names);
  // The error a timed-out name fails with.
  Error name_timeout(const std::string& name, const std::vector<bool>& have) const;

  // Rank 0 keeps the clocks and decides; other ranks' monitors never ask for
  // anything (their requests stay empty).
  bool decides() const { return decides_; }

 private:
  struct Watch {  // one stalled id or registry entry
    Clock::time_point first_seen;
    bool warned = false;
  };
  bool timeout_due(double waited_s) const;
  void warn(const std::string& name, double waited_s, const std::string& missing) const;
  Error timeout(const std::string& name, const std::string& missing) const;

  int rank_;
  bool decides_;  // rank 0
  StallPolicy policy_;
  std::unordered_map<std::size_t, Watch> id_clocks_;      // rank 0
  std::unordered_map<std::uint64_t, Watch> name_clocks_;  // rank 0, by registry order
  bool diagnose_next_ = false;
  std::vector<std::size_t> ids_to_fail_;
  std::vector<std::string> names_to_fail_;
  // Every rank: the missing ranks of stalled cached ids, from the last diagnosis.
  std::unordered_map<std::size_t, std::string> missing_by_id_;
};

}  // namespace concord::detail
