// Helpers of the tests whose calls fail on purpose (checked calls, aborts): the
// error a call throws, a checked call's options, and a communicator to fail.
#pragma once

#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

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

// A communicator of its own (a duplicate of the world's), for tests that fail
// it; `dup` is freed by the caller once the communicator has gone.
inline Communicator own_communicator(MPI_Comm& dup) {
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  return Communicator(dup);
}

}  // namespace concord::test
