// The MPI transport's deadline (CONCORD_TRANSPORT_TIMEOUT_S): a peer that never
// sends makes the wait fail with ErrorCode::Timeout naming it, instead of hanging,
// and unwinding the transport does not wait on the abandoned request.
#include <catch2/catch.hpp>

#include <concord/error.hpp>

#include "transport/mpi_transport.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>

TEST_CASE("a wait on a silent peer times out and names it", "[transport][timeout]") {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) return;  // needs a peer
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  constexpr int kTag = 7;
  std::int64_t late = 0;  // outlives the abandoned receive: rank 1 sends into it later
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
    }  // the destructor frees the pending receive rather than waiting on it
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(code == concord::ErrorCode::Timeout);
    CHECK_THAT(message, Catch::Matchers::Contains("waiting on rank 1") &&
                            Catch::Matchers::Contains("CONCORD_TRANSPORT_TIMEOUT_S"));
    CHECK(waited >= 0.3);
    CHECK(waited < 10);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The message the abandoned receive was waiting for arrives after all, so
  // nothing is left in flight when the communicator is freed.
  if (rank == 1) {
    const std::int64_t value = 42;
    MPI_Ssend(&value, 1, MPI_INT64_T, 0, kTag, comm);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) CHECK(late == 42);
  MPI_Comm_free(&comm);
}
