// The MPI transport's deadline (CONCORD_TRANSPORT_TIMEOUT_S): a peer that never
// sends makes the wait fail with ErrorCode::Timeout naming it, instead of hanging,
// and unwinding the transport does not wait on the abandoned request. An abort
// (Communicator::abort's flag, raised from another thread) ends such a wait the
// same way, at once, with ErrorCode::Shutdown. Either way the abandoned receive
// is cancelled: the message it waited for, sent late, does not land in its buffer
// (which its owner may free or reuse) but waits for a receive of its own.
#include <catch2/catch.hpp>

#include <concord/error.hpp>

#include "transport/mpi_transport.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace {

// After rank 0 abandoned a receive of tag `tag` into `late` (holding 0): rank 1
// sends `value` after all. Rank 0 then receives it with a receive of its own,
// within a bound; had the abandoned receive stayed posted, it would have matched
// first, writing `late` and leaving the new receive waiting.
void check_late_message_not_taken(MPI_Comm comm, int rank, int tag, std::int64_t value,
                                  const std::int64_t& late) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) MPI_Send(&value, 1, MPI_INT64_T, 0, tag, comm);
  if (rank == 0) {
    std::int64_t drained = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Irecv(&drained, 1, MPI_INT64_T, 1, tag, comm, &request);
    int done = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done && std::chrono::steady_clock::now() < until) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    if (!done) {
      MPI_Cancel(&request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
    CHECK(done);
    CHECK(drained == value);
    CHECK(late == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

TEST_CASE("a wait on a silent peer times out and names it", "[transport][timeout]") {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) return;  // needs a peer
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  constexpr int kTag = 7;
  std::int64_t late = 0;  // the abandoned receive's buffer: must stay 0
  if (rank == 0) {
    std::string message;
    auto code = concord::ErrorCode::Internal;
    const auto start = std::chrono::steady_clock::now();
    {
      concord::detail::MpiTransport transport(comm, 0.3);
      concord::detail::Request request = transport.irecv(1, &late, sizeof late, kTag);
      try {
        transport.wait(request);
      } catch (const concord::Error& e) {
        code = e.code();
        message = e.what();
      }
    }  // the destructor cancels the pending receive rather than waiting on it
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(code == concord::ErrorCode::Timeout);
    CHECK_THAT(message, Catch::Matchers::Contains("waiting on rank 1") &&
                            Catch::Matchers::Contains("CONCORD_TRANSPORT_TIMEOUT_S"));
    CHECK(waited >= 0.3);
    CHECK(waited < 10);
  }
  check_late_message_not_taken(comm, rank, kTag, 42, late);
  MPI_Comm_free(&comm);
}

TEST_CASE("an aborted wait on a silent peer stops at once and names it",
          "[transport][aborted_wait]") {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) return;  // needs a peer
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  constexpr int kTag = 8;
  std::int64_t late = 0;  // the abandoned receive's buffer: must stay 0
  if (rank == 0) {
    std::string message;
    auto code = concord::ErrorCode::Internal;
    concord::detail::AbortSignal abort;
    const auto start = std::chrono::steady_clock::now();
    std::thread aborter([&abort] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      abort.raise();
    });
    {
      // No deadline: only the abort can end this wait.
      concord::detail::MpiTransport transport(comm, 0, &abort);
      concord::detail::Request request = transport.irecv(1, &late, sizeof late, kTag);
      try {
        transport.wait(request);
      } catch (const concord::Error& e) {
        code = e.code();
        message = e.what();
      }
    }  // the destructor cancels the pending receive rather than waiting on it
    aborter.join();
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(code == concord::ErrorCode::Shutdown);
    CHECK_THAT(message, Catch::Matchers::Contains("aborted the communicator") &&
                            Catch::Matchers::Contains("while waiting on rank 1"));
    CHECK(waited >= 0.3);
    CHECK(waited < 10);
  }
  check_late_message_not_taken(comm, rank, kTag, 43, late);
  MPI_Comm_free(&comm);
}
