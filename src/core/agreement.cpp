#include "core/agreement.hpp"

#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/mpi_wait.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <vector>

namespace concord::detail {

void wait_for_setup(MPI_Request& request, const char* call, int rank, const SetupWait& wait) {
  const double timeout_s = config().transport_timeout_s;
  // Idle: a rank may come to its first call minutes after the others (loading
  // its data); polling gently leaves their cores to their own threads.
  const PollResult polled =
      poll_until_done([&](int* done) { return MPI_Test(&request, done, MPI_STATUS_IGNORE); },
                      timeout_s, Patience::Idle, wait.abort);
  if (polled.aborted || polled.timed_out) request = MPI_REQUEST_NULL;  // abandoned
  if (polled.aborted) {
    throw aborted_error(rank,
                        fmt::format("while {} ({}) waited on the other ranks", wait.step, call));
  }
  if (polled.timed_out) {
    throw timeout_error(rank, timeout_s, fmt::format("the other ranks in {} ({})", wait.step, call),
                        std::string(wait.consequence));
  }
  check_mpi(polled.rc, "MPI_Test", rank);
}

int least_over_ranks(MPI_Comm comm, int value, int rank, const SetupWait& wait) {
  // On the heap: an abandoned request may still write it (keep_until_exit).
  std::vector<int> least{value};
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, least.data(), 1, MPI_INT, MPI_MIN, comm, &request),
            "MPI_Iallreduce", rank);
  wait_for_setup(request, "MPI_Iallreduce", rank, wait, least);
  return least[0];
}

bool all_ranks_ok(MPI_Comm comm, bool ok, int rank, const SetupWait& wait) {
  return least_over_ranks(comm, ok ? 1 : 0, rank, wait) != 0;
}

std::vector<std::byte> gather_over_ranks(MPI_Comm comm, const void* mine, std::size_t bytes,
                                         int rank, const SetupWait& wait) {
  int size = 1;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size", rank);
  // Both on the heap, for an abandoned request as above.
  std::vector<std::byte> sent(static_cast<const std::byte*>(mine),
                              static_cast<const std::byte*>(mine) + bytes);
  std::vector<std::byte> all(bytes * static_cast<std::size_t>(size));
  const int count = static_cast<int>(bytes);
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(
      MPI_Iallgather(sent.data(), count, MPI_BYTE, all.data(), count, MPI_BYTE, comm, &request),
      "MPI_Iallgather", rank);
  wait_for_setup(request, "MPI_Iallgather", rank, wait, sent, all);
  return all;
}

std::vector<std::byte> broadcast_over_ranks(MPI_Comm comm, const void* value, std::size_t bytes,
                                            int rank, const SetupWait& wait) {
  // On the heap, for an abandoned request as above.
  std::vector<std::byte> data(static_cast<const std::byte*>(value),
                              static_cast<const std::byte*>(value) + bytes);
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(data.data(), static_cast<int>(bytes), MPI_BYTE, 0, comm, &request),
            "MPI_Ibcast", rank);
  wait_for_setup(request, "MPI_Ibcast", rank, wait, data);
  return data;
}

bool agree_or_fall_back(MPI_Comm comm, const std::string& local_failure, int rank,
                        const FallBack& fall_back, const SetupWait& wait) {
  if (all_ranks_ok(comm, local_failure.empty(), rank, wait)) return true;
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
