// Helpers shared by the engine's tests (tests/mpi/test_engine*.cpp and the device
// engine's in tests/gpu): short cycles, the error a handle or a submission fails with,
// and the time since a start.
#pragma once

#include <concord/concord.hpp>

#include <chrono>
#include <string>

namespace concord::test {

// An engine that cycles every 0.5 ms: the tests wait less for their tensors to meet.
inline EngineOptions quick() {
  EngineOptions o;
  o.cycle_time_ms = 0.5;
  return o;
}

// What `handle` completed with: its error's message, or "" when it succeeded.
inline std::string failure_of(Handle& handle) {
  try {
    handle.wait();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// What a submission fails with: the engine's refusal at enqueue, or its handle's
// error (a stopping engine may still take it); "" when it succeeded. `submit`
// returns the Handle.
template <class Submit>
std::string failure_of_submission(Submit&& submit) {
  try {
    Handle handle = submit();
    return failure_of(handle);
  } catch (const Error& e) {
    return e.what();
  }
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace concord::test
