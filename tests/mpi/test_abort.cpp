// Communicator::abort, from another thread while a call waits for a rank that
// never comes: the call stops waiting at once with ErrorCode::Shutdown, the
// communicator has failed for good, and the late rank, when it comes, fails
// instead of waiting for the rank that left. Hidden: it needs one node (shared
// memory), and CONCORD_TRANSPORT_TIMEOUT_S as a net under a regression that
// would otherwise hang until the test's timeout.
#include <catch2/catch.hpp>

#include "failing_calls.hpp"

#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

using namespace concord;

using concord::test::aborted_while_waiting;
using concord::test::an_abort_stops_a_first_call_waiting_in;
using concord::test::checked;
using concord::test::error_of;
using concord::test::own_communicator;
using concord::test::seconds_since;

TEST_CASE("an abort stops a checked call waiting for a rank that never comes, for good",
          "[.][abort]") {
  MPI_Comm dup = MPI_COMM_NULL;
  {
    Communicator comm = own_communicator(dup);
    if (comm.size() < 2) return;
    const int late = comm.size() - 1;
    std::vector<float> buf(4096, 1.0f);
    auto reduce = [&](const AllreduceOptions& options) {
      allreduce(buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum, comm,
                options);
    };
    reduce(checked(60));  // every rank has met once: the node's arena exists
    if (comm.rank() != late) {
      // Without the abort this would wait a minute.
      const std::string message =
          aborted_while_waiting(comm, 0.3, [&] { reduce(checked(60, "all_reduce #2")); });
      CHECK_THAT(message, Catch::Matchers::Contains("all_reduce #2"));
      // For good: checked or not, later calls fail at once with the same error.
      const auto [again, again_message] = error_of([&] { reduce(AllreduceOptions{}); });
      CHECK(again == ErrorCode::Shutdown);
      CHECK(again_message == message);
    }
    MPI_Barrier(MPI_COMM_WORLD);  // the late rank comes now
    if (comm.rank() == late) {
      CHECK_FALSE(comm.aborted());  // the flag is the aborting rank's only
      const auto start = std::chrono::steady_clock::now();
      const auto [code, message] = error_of([&] { reduce(checked(60)); });
      CHECK(code == ErrorCode::Timeout);
      CHECK_THAT(message, Catch::Matchers::Contains("gave up on this communicator"));
      CHECK(seconds_since(start) < 10);
    }
  }
  MPI_Comm_free(&dup);
}

TEST_CASE("an abort stops an unchecked call waiting in shared memory", "[.][abort]") {
  MPI_Comm dup = MPI_COMM_NULL;
  {
    Communicator comm = own_communicator(dup);
    if (comm.size() < 2) return;
    const int late = comm.size() - 1;
    std::vector<float> buf(4096, 1.0f);
    auto reduce = [&] {
      allreduce(buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum, comm);
    };
    reduce();  // the node's arena exists: the next call waits in it, not in its set-up
    if (comm.rank() != late) {
      const std::string message = aborted_while_waiting(comm, 0.3, reduce);
      CHECK_THAT(message, Catch::Matchers::Contains("while waiting on the node's local rank"));
    }
    MPI_Barrier(MPI_COMM_WORLD);  // the late rank never calls: its peers left for good
  }
  MPI_Comm_free(&dup);
}

TEST_CASE("an abort stops a first call waiting for a rank in the shared-memory set-up",
          "[.][abort]") {
  // The communicator's first call: its ranks meet in the node's set-up first.
  an_abort_stops_a_first_call_waiting_in("the shared-memory transport's set-up");
}

TEST_CASE("a call after an abort fails at once; its peers' checked call fails at its deadline",
          "[.][abort]") {
  MPI_Comm dup = MPI_COMM_NULL;
  {
    Communicator comm = own_communicator(dup);
    if (comm.size() < 2) return;
    float x = 1;
    auto reduce = [&](const AllreduceOptions& options) {
      allreduce(&x, &x, 1, DataType::Float32, ReduceOp::Sum, comm, options);
    };
    reduce(checked(60));
    const auto start = std::chrono::steady_clock::now();
    if (comm.rank() == 0) {
      comm.abort();
      const auto [code, message] = error_of([&] { reduce(checked(60)); });
      CHECK(code == ErrorCode::Shutdown);
      CHECK_THAT(message, Catch::Matchers::Contains("aborted the communicator") &&
                              Catch::Matchers::Contains("before this call"));
      CHECK(seconds_since(start) < 1);
    } else {
      const auto [code, message] = error_of([&] { reduce(checked(0.5)); });
      CHECK(code == ErrorCode::Timeout);
      CHECK_THAT(message, Catch::Matchers::Contains("rank 0 did not reach this call"));
      CHECK(seconds_since(start) >= 0.5);
      CHECK(seconds_since(start) < 10);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Comm_free(&dup);
}
