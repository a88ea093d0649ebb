// A rank that never makes a communicator: its peers fail in its construction at
// the deadline instead of waiting in MPI for ever, and so does that rank when it
// comes after they gave up. A rank that never
// comes to a communicator's first call: its peers wait for it
// in the node's shared-memory set-up, which fails at the transport's deadline
// (CONCORD_TRANSPORT_TIMEOUT_S, 2 s in this test's registration) instead of
// holding them in MPI for ever, and the communicator has failed for good. With
// CONCORD_CHECK_ARGS=1 they wait in its check first, which fails the same way,
// or at an abort. Hidden: they need one node and that short deadline.
#include <catch2/catch.hpp>

#include "failing_calls.hpp"

#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

using namespace concord;

using concord::test::an_abort_stops_a_first_call_waiting_in;
using concord::test::error_of;
using concord::test::own_communicator;
using concord::test::seconds_since;

namespace {

// Runs `call`, which waits for a rank that is not coming; checks that it failed
// with Timeout naming `wait` after the 2 s deadline (and not much later), and
// returns the error's message.
template <typename Call>
std::string fails_at_the_deadline(Call&& call, const char* wait) {
  const auto start = std::chrono::steady_clock::now();
  const auto [code, message] = error_of(call);
  const double waited = seconds_since(start);
  CHECK(code == ErrorCode::Timeout);
  CHECK_THAT(message, Catch::Matchers::Contains(wait) && Catch::Matchers::Contains("for 2 s"));
  CHECK(waited >= 2);
  CHECK(waited < 20);
  return message;
}

// The last rank never calls; the others' first allreduce fails with Timeout
// naming `wait` (where they waited for it) after the 2 s deadline, and so does
// their next call, with the same error: the communicator has failed for good.
void a_late_rank_fails_the_others_in(const char* wait) {
  MPI_Comm dup = MPI_COMM_NULL;
  {
    Communicator comm = own_communicator(dup);
    if (comm.size() < 2) return;
    const int late = comm.size() - 1;
    std::vector<float> buf(64, 1.0f);
    auto reduce = [&] {
      allreduce(buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum, comm);
    };
    if (comm.rank() != late) {
      const std::string message = fails_at_the_deadline(reduce, wait);
      // For good: the next call fails at once with the same error.
      const auto [again, again_message] = error_of(reduce);
      CHECK(again == ErrorCode::Timeout);
      CHECK(again_message == message);
      CHECK(buf[0] == 1.0f);  // nothing moved
    }
    MPI_Barrier(MPI_COMM_WORLD);  // the late rank never calls
  }
  MPI_Comm_free(&dup);
}

}  // namespace

TEST_CASE(
    "a rank that never makes the communicator fails its peers' construction at the deadline and "
    "its own when it comes late",
    "[.][setup_timeout]") {
  MPI_Comm given = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &given);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(given, &rank);
  MPI_Comm_size(given, &size);
  const int late = size - 1;
  if (size >= 2 && rank != late) {
    const std::string message = fails_at_the_deadline([&] { Communicator never_made(given); },
                                                      "the communicator's construction");
    CHECK_THAT(message, Catch::Matchers::Contains("end the job"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The late rank comes now: its first exchange completes against its peers'
  // abandoned one, and it fails in the duplicate they never make, at the deadline
  // too, instead of waiting in MPI_Comm_dup for ever. Its peers wait in a barrier
  // meanwhile (MPI progresses their abandoned exchange there). Its abandoned
  // duplicate stays pending: MPI_Finalize returns with it under the MPICH (4.0)
  // and Open MPI that CI runs; a newer MPICH may wait on it there.
  if (size >= 2 && rank == late) {
    const std::string message = fails_at_the_deadline([&] { Communicator never_made(given); },
                                                      "the communicator's construction");
    CHECK_THAT(message, Catch::Matchers::Contains("MPI_Comm_idup"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // `given` holds abandoned exchanges, which never complete: it is left to the
  // job's end, as the error tells a program to do (MPI_Comm_free is collective,
  // so no rank frees it).
  if (size < 2) MPI_Comm_free(&given);
}

TEST_CASE("a rank that never comes to the first call fails its peers' set-up at the deadline",
          "[.][setup_timeout]") {
  a_late_rank_fails_the_others_in("the shared-memory transport's set-up");
}

TEST_CASE("with CONCORD_CHECK_ARGS=1, a rank that never comes fails its peers' check",
          "[.][check_args_timeout]") {
  a_late_rank_fails_the_others_in("the CONCORD_CHECK_ARGS check");
}

TEST_CASE("with CONCORD_CHECK_ARGS=1, an abort stops the check", "[.][check_args_timeout]") {
  // Shutdown, not the deadline's Timeout: the abort came first.
  an_abort_stops_a_first_call_waiting_in("the CONCORD_CHECK_ARGS check");
}
