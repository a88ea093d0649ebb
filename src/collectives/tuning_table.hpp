// Auto selection: one table of crossovers, by rank count and message size.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace concord::detail {

// JSON (docs/ALGORITHMS.md, src/collectives/tuning_default.json):
//   {"rules": [{"max_ranks": 2, "algorithms": [{"max_bytes": 4096, "algorithm":
//   "recursive_doubling"}, {"max_bytes": null, "algorithm": "ring"}]}, ...]}
// The first rule whose max_ranks (null: no limit) covers the rank count applies;
// within it, the first entry whose max_bytes covers the message size.
class TuningTable {
 public:
  struct Threshold {
    std::size_t max_bytes;  // SIZE_MAX: no limit
    Algorithm algorithm;
  };
  struct Rule {
    int max_ranks;  // INT_MAX: no limit
    std::vector<Threshold> thresholds;
  };

  // Throws Error(InvalidArgument) naming `origin` and what is wrong.
  static TuningTable parse(std::string_view json, const std::string& origin);
  // The built-in table, measured on the development machine.
  static const TuningTable& built_in();

  Algorithm choose(std::size_t bytes, int ranks) const;
  const std::vector<Rule>& rules() const { return rules_; }

 private:
  std::vector<Rule> rules_;
};

// The table in force: CONCORD_TUNING_FILE if set, else the built-in; loaded once.
const TuningTable& active_tuning_table();

// What `requested` means at this size and rank count: never Auto. Auto picks
// Hierarchical whenever ranks share a node (`ranks_share_a_node`, the same on
// every rank) and the table's flat algorithm otherwise.
Algorithm resolve_algorithm(Algorithm requested, std::size_t bytes, int ranks,
                            bool ranks_share_a_node);

// The table's choice among the flat algorithms (Ring where it names Hierarchical).
Algorithm choose_flat_algorithm(std::size_t bytes, int ranks);

}  // namespace concord::detail
