#include "core/agreement.hpp"

#include "core/mpi_check.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace concord::detail {

bool all_ranks_ok(MPI_Comm comm, bool ok, int rank) {
  int flag = ok ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce", rank);
  return flag != 0;
}

bool agree_or_fall_back(MPI_Comm comm, const std::string& local_failure, int rank,
                        const FallBack& fall_back) {
  if (all_ranks_ok(comm, local_failure.empty(), rank)) return true;
  if (!local_failure.empty()) {
    fmt::print(stderr, "{}; {}\n", local_failure, fall_back.instead);
    return false;
  }
  int comm_rank = 0;
  check_mpi(MPI_Comm_rank(comm, &comm_rank), "MPI_Comm_rank", rank);
  if (comm_rank == 0) {
    fmt::print(stderr, "concord: rank {}: {} failed on another rank; {}\n", rank, fall_back.what,
               fall_back.instead);
  }
  return false;
}

}  // namespace concord::detail
