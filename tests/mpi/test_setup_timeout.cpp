// A rank that never comes to a communicator's first call: its peers wait for it
// in the node's shared-memory set-up, which fails at the transport's deadline
// (CONCORD_TRANSPORT_TIMEOUT_S, 2 s in this test's registration) instead of
// holding them in MPI for ever, and the communicator has failed for good.
// Hidden: it needs one node and that short deadline.
#include <catch2/catch.hpp>

#include "failing_calls.hpp"

#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

using namespace concord;

using concord::test::error_of;
using concord::test::own_communicator;
using concord::test::seconds_since;

TEST_CASE("a rank that never comes to the first call fails its peers' set-up at the deadline",
          "[.][setup_timeout]") {
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
      const auto start = std::chrono::steady_clock::now();
      const auto [code, message] = error_of(reduce);
      const double waited = seconds_since(start);
      CHECK(code == ErrorCode::Timeout);
      CHECK_THAT(message, Catch::Matchers::Contains("the shared-memory transport's set-up") &&
                              Catch::Matchers::Contains("for 2 s"));
      CHECK(waited >= 2);
      CHECK(waited < 20);
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
