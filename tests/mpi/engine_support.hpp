// Helpers shared by the engine's tests (tests/mpi/test_engine*.cpp and the device
// engine's in tests/gpu): short cycles, and the error a handle completes with.
#pragma once

#include <concord/concord.hpp>

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

}  // namespace concord::test
