// Helpers of the tests whose calls fail on purpose (checked calls, aborts): the
// error a call throws, a checked call's options, a call aborted from another
// thread, a communicator to fail, and a first call aborted while it waits.
#pragma once

#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace concord::test {

// The error `call` throws (code Internal and an empty message where it throws none).
template <typename Call>
std::pair<ErrorCode, std::string> error_of(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {ErrorCode::Internal, ""};
}

inline AllreduceOptions checked(double timeout_s, std::string_view label = "test call") {
  AllreduceOptions options;
  options.agreement_timeout_s = timeout_s;
  options.label = label;
  return options;
}

// Seconds from `start` to now.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs `call`, which waits for a rank that is not coming, while another thread
// aborts `comm` after `delay_s`; checks that the call failed with the abort's
// error soon after, and returns its message.
template <typename Call>
std::string aborted_while_waiting(const Communicator& comm, double delay_s, Call&& call) {
  const auto start = std::chrono::steady_clock::now();
  std::thread aborter([&comm, delay_s] {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    comm.abort();
  });
  const auto [code, message] = error_of(call);
  aborter.join();
  const double waited = seconds_since(start);
  CHECK(code == ErrorCode::Shutdown);
  CHECK_THAT(message, Catch::Matchers::Contains("aborted the communicator"));
  CHECK(waited >= delay_s);
  CHECK(waited < 10);
  CHECK(comm.aborted());
  return message;
}

// A communicator of its own (a duplicate of the world's), for tests that fail
// it; `dup` is freed by the caller once the communicator has gone.
inline Communicator own_communicator(MPI_Comm& dup) {
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  return Communicator(dup);
}

// The last rank never calls; the others' first allreduce on a communicator of
// their own waits for it in `wait` until another thread aborts the communicator
// (aborted_while_waiting), and its error names `wait`.
inline void an_abort_stops_a_first_call_waiting_in(const char* wait) {
  MPI_Comm dup = MPI_COMM_NULL;
  {
    Communicator comm = own_communicator(dup);
    if (comm.size() < 2) return;
    const int late = comm.size() - 1;
    std::vector<float> buf(64, 1.0f);
    if (comm.rank() != late) {
      const std::string message = aborted_while_waiting(comm, 0.3, [&] {
        allreduce(buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum, comm);
      });
      CHECK_THAT(message, Catch::Matchers::Contains(wait));
    }
    MPI_Barrier(MPI_COMM_WORLD);  // the late rank never calls: its peers left for good
  }
  MPI_Comm_free(&dup);
}

}  // namespace concord::test
