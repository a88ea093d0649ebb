#include "allreduce/shm_phases.hpp"

#include <fmt/format.h>

namespace concord::bench {

void ShmPhaseSampler::end(std::size_t impl) {
  const detail::ShmPhaseTotals& now = detail::shm_phase_totals();
  for (std::size_t k = 0; k < detail::kShmPhases; ++k) {
    sums_[impl].seconds[k] += now.seconds[k] - start_.seconds[k];
  }
  sums_[impl].rounds += now.rounds - start_.rounds;
}

void ShmPhaseSampler::report(MPI_Comm comm, std::size_t bytes, int calls,
                             const std::vector<std::string>& labels) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  for (std::size_t i = 0; i < sums_.size(); ++i) {
    double mean[detail::kShmPhases] = {};
    MPI_Reduce(sums_[i].seconds.data(), mean, static_cast<int>(detail::kShmPhases), MPI_DOUBLE,
               MPI_SUM, 0, comm);
    if (rank != 0 || sums_[i].rounds == 0) continue;
    std::string line = fmt::format("# phases {} {} B, us/call (mean of ranks):", labels[i], bytes);
    double total = 0;
    for (std::size_t k = 0; k < detail::kShmPhases; ++k) {
      const double us = mean[k] / ranks / calls * 1e6;
      total += us;
      line +=
          fmt::format(" {} {:.1f}", detail::shm_phase_name(static_cast<detail::ShmPhase>(k)), us);
    }
    line += fmt::format(" | sum {:.1f}, rounds/call {:.1f}", total,
                        static_cast<double>(sums_[i].rounds) / calls);
    fmt::print("{}\n", line);
  }
  sums_.assign(sums_.size(), {});
}

}  // namespace concord::bench
