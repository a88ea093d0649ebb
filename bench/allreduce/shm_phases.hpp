// The shared-memory allreduce's step times (CONCORD_SHM_PHASE_TIMES=1), taken
// around each implementation's timed calls and printed per size.
#pragma once

#include "collectives/shared/phases.hpp"

#include <mpi.h>

#include <string>
#include <vector>

namespace concord::bench {

class ShmPhaseSampler {
 public:
  explicit ShmPhaseSampler(std::size_t impls) : sums_(impls) {}
  static bool enabled() { return detail::shm_phase_timing(); }
  // Around one implementation's timed calls: books what they added.
  void begin() { start_ = detail::shm_phase_totals(); }
  void end(std::size_t impl);
  // Rank 0 prints, for each implementation that ran shared-memory rounds, the
  // mean over ranks of each step's time per call. Collective.
  void report(MPI_Comm comm, std::size_t bytes, int calls, const std::vector<std::string>& labels);

 private:
  std::vector<detail::ShmPhaseTotals> sums_;
  detail::ShmPhaseTotals start_{};
};

}  // namespace concord::bench
