// Checked calls (AllreduceOptions::agreement_timeout_s): the ranks exchange the
// call's arguments with a deadline before any data moves. Ranks that disagree
// fail on every rank with nothing moved; a rank that never comes fails the call
// on the others, naming it; the communicator then stays failed, and a rank that
// comes late fails instead of waiting for peers that gave up.
#include <catch2/catch.hpp>

#include "failing_calls.hpp"

#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <limits>
#include <string>
#include <vector>

using namespace concord;

using concord::test::checked;
using concord::test::error_of;
using concord::test::own_communicator;

TEST_CASE("a checked allreduce agrees, then reduces, between unchecked ones", "[agreement]") {
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  const AllreduceOptions options = checked(60);
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{70000}}) {
    for (int call = 0; call < 6; ++call) {
      // Rank r contributes r + 1 + call: the sum is ranks(ranks + 1)/2 + ranks * call.
      std::vector<double> data(count, static_cast<double>(comm.rank() + 1 + call));
      const bool check_this = call % 2 == 0;
      allreduce(data.data(), data.data(), count, DataType::Float64, ReduceOp::Sum, comm,
                check_this ? options : AllreduceOptions{});
      const double expected = ranks * (ranks + 1) / 2.0 + ranks * call;
      std::size_t wrong = 0;
      for (double x : data) wrong += x != expected ? 1 : 0;
      INFO("count " << count << ", call " << call << (check_this ? " (checked)" : ""));
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("ranks whose checked calls disagree all fail, nothing moved, and go on", "[agreement]") {
  Communicator comm = Communicator::world();
  if (comm.size() < 2) return;  // needs a peer to disagree with
  const int odd_rank = comm.size() - 1;
  const float mine = static_cast<float>(comm.rank() + 1);
  std::vector<float> buf(16, mine);
  const std::size_t count = comm.rank() == odd_rank ? 9 : 8;
  const auto [code, message] = error_of([&] {
    allreduce(buf.data(), buf.data(), count, DataType::Float32, ReduceOp::Sum, comm,
              checked(60, "all_reduce #7"));
  });
  CHECK(code == ErrorCode::Mismatch);
  CHECK_THAT(message,
             Catch::Matchers::Contains("all_reduce #7") &&
                 Catch::Matchers::Contains("rank " + std::to_string(odd_rank) + " passed count=9"));
  CHECK(buf == std::vector<float>(16, mine));  // nothing moved

  // A rank whose own arguments are bad: it raises its own error, the others name it.
  float* send = comm.rank() == odd_rank ? nullptr : buf.data();
  const auto [bad_code, bad_message] = error_of(
      [&] { allreduce(send, buf.data(), 8, DataType::Float32, ReduceOp::Sum, comm, checked(60)); });
  if (comm.rank() == odd_rank) {
    CHECK(bad_code == ErrorCode::InvalidArgument);
  } else {
    CHECK(bad_code == ErrorCode::Mismatch);
    CHECK_THAT(bad_message, Catch::Matchers::Contains("rank(s) " + std::to_string(odd_rank)));
  }

  // The communicator is still usable.
  allreduce(buf.data(), buf.data(), 16, DataType::Float32, ReduceOp::Sum, comm, checked(60));
  const float sum = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  CHECK(buf == std::vector<float>(16, sum));
}

TEST_CASE("a bad agreement timeout is rejected", "[agreement]") {
  Communicator comm = Communicator::world();
  float x = 1;
  for (double bad : {-1.0, std::numeric_limits<double>::infinity()}) {
    const auto [code, message] = error_of(
        [&] { allreduce(&x, &x, 1, DataType::Float32, ReduceOp::Sum, comm, checked(bad)); });
    CHECK(code == ErrorCode::InvalidArgument);
    CHECK_THAT(message, Catch::Matchers::Contains("agreement_timeout_s"));
  }
}

// The last rank comes only after the others have given up on it. Run on one node
// (the late rank then meets its peers' poisoned counters in shared memory) with
// CONCORD_TRANSPORT_TIMEOUT_S set, so that a regression fails instead of hanging.
TEST_CASE("a rank that never comes fails the checked call on the others, for good",
          "[.][agreement_timeout]") {
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
      const auto start = std::chrono::steady_clock::now();
      const auto [code, message] = error_of([&] { reduce(checked(0.5, "all_reduce #2")); });
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      CHECK(code == ErrorCode::Timeout);
      CHECK_THAT(message, Catch::Matchers::Contains("all_reduce #2") &&
                              Catch::Matchers::Contains("rank " + std::to_string(late) +
                                                        " did not reach this call"));
      CHECK(waited >= 0.5);
      CHECK(waited < 10);
      // For good: checked or not, later calls fail at once with the same error.
      const auto [again, again_message] = error_of([&] { reduce(AllreduceOptions{}); });
      CHECK(again == ErrorCode::Timeout);
      CHECK(again_message == message);
    }
    MPI_Barrier(MPI_COMM_WORLD);  // the late rank comes now
    if (comm.rank() == late) {
      const auto start = std::chrono::steady_clock::now();
      const auto [code, message] = error_of([&] { reduce(checked(60)); });
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      CHECK(code == ErrorCode::Timeout);
      CHECK_THAT(message, Catch::Matchers::Contains("gave up on this communicator"));
      CHECK(waited < 10);
    }
  }
  MPI_Comm_free(&dup);
}
