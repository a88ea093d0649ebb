// Engine::abort, from another thread while a handle waits on a rank that never
// submits its tensor: the handle fails at once with ErrorCode::Shutdown, and so
// does every later operation; the late rank's engine, left waiting in its
// negotiation by peers that stopped, ends as soon as it aborts too, long before
// CONCORD_TRANSPORT_TIMEOUT_S. Hidden with the communicator's abort tests
// (test_abort.cpp), which run with that deadline as a net under a hang.
#include <catch2/catch.hpp>

#include "failing_calls.hpp"

#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace concord;

using concord::test::error_of;
using concord::test::own_communicator;
using concord::test::seconds_since;

namespace {

// A later operation on an aborted engine fails at once with the abort's error.
void check_refuses_after_abort(Engine& engine) {
  std::vector<float> later(8, 1.0f);
  const auto [code, message] = error_of([&] {
    engine.enqueue_allreduce("later", {later.data(), later.size(), DataType::Float32},
                             ReduceOp::Sum);
  });
  CHECK(code == ErrorCode::Shutdown);
  CHECK_THAT(message, Catch::Matchers::Contains("aborted the engine (Engine::abort)"));
}

}  // namespace

TEST_CASE("an engine abort fails a handle waiting on a rank that never submits, for good",
          "[.][abort][engine_abort]") {
  MPI_Comm dup = MPI_COMM_NULL;
  {
    Communicator comm = own_communicator(dup);
    if (comm.size() < 2) return;
    const int late = comm.size() - 1;
    EngineOptions options;
    options.cycle_time_ms = 1;
    options.stall_warning_s = 600;  // the wait is on purpose: no warning
    Engine engine(comm, options);
    std::vector<float> first(16, static_cast<float>(comm.rank() + 1));
    engine
        .enqueue_allreduce("first", {first.data(), first.size(), DataType::Float32}, ReduceOp::Sum)
        .wait();
    const float expected = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
    CHECK(first[0] == expected);
    CHECK(first[15] == expected);

    if (comm.rank() != late) {
      std::vector<float> x(1024, 1.0f);
      Handle handle =
          engine.enqueue_allreduce("x", {x.data(), x.size(), DataType::Float32}, ReduceOp::Sum);
      const auto start = std::chrono::steady_clock::now();
      std::thread aborter([&engine] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        engine.abort();  // returns at once: no join here
      });
      const auto [code, message] = error_of([&] { handle.wait(); });
      aborter.join();
      const double waited = seconds_since(start);
      CHECK(code == ErrorCode::Shutdown);
      CHECK_THAT(message, Catch::Matchers::Contains("aborted the engine (Engine::abort)"));
      CHECK(waited >= 0.3);
      CHECK(waited < 10);
      check_refuses_after_abort(engine);
      CHECK(x[0] == 1.0f);  // never reduced: nothing ran
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm.rank() == late) {
      // Its peers' engines stopped: this one's negotiation waits on them until
      // the transport's deadline (20 s here), unless it aborts too.
      const auto start = std::chrono::steady_clock::now();
      engine.abort();
      engine.shutdown();  // joins the engine thread, which has stopped by now
      CHECK(seconds_since(start) < 10);
      check_refuses_after_abort(engine);
    }
    const auto start = std::chrono::steady_clock::now();
    engine.shutdown();  // idempotent after the abort, and quick
    CHECK(seconds_since(start) < 5);
  }
  MPI_Comm_free(&dup);
}
