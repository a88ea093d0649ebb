// When the engine's cycles start: a grouped allreduce (tensors the caller sends
// together) is negotiated at once, not after the cycle time, which exists to
// gather tensors that arrive one by one. With a cycle time of seconds, calls in
// lockstep would each wait about a cycle if the group waited for it.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

using namespace concord;

TEST_CASE("a grouped allreduce starts its cycle at once and a lone tensor still completes",
          "[engine]") {
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  EngineOptions options;
  options.cycle_time_ms = 1000;
  Engine engine(comm, options);
  const std::vector<std::string> names{"cycle/w", "cycle/b", "cycle/v"};
  const std::vector<std::size_t> counts{4096, 16, 1};
  // Rank r contributes r + 1 + call, so every call's sum differs from the last.
  auto run_group = [&](int call) {
    std::vector<std::vector<float>> data;
    std::vector<TensorView> views;
    for (std::size_t count : counts) {
      data.emplace_back(count, static_cast<float>(comm.rank() + 1 + call));
    }
    for (auto& d : data) views.push_back({d.data(), d.size(), DataType::Float32});
    for (auto& h : engine.enqueue_grouped_allreduce(names, views, ReduceOp::Sum)) h.wait();
    const float expected = static_cast<float>(ranks * (ranks + 1) / 2 + ranks * call);
    for (const auto& d : data) {
      for (float x : d) {
        if (x != expected) {
          FAIL_CHECK("call " << call << ": got " << x << ", expected " << expected);
          return;
        }
      }
    }
  };
  run_group(0);  // the first call announces the names; later ones hit the cache
  const auto start = std::chrono::steady_clock::now();
  const int calls = 5;
  for (int call = 1; call <= calls; ++call) run_group(call);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(calls << " grouped calls took " << seconds << " s with a cycle time of 1 s");
  // Waiting for the cycle time they would take about 5 s; at once, milliseconds.
  CHECK(seconds < 1.0);

  // A lone tensor is not a group: it waits for the next cycle, and completes.
  float lone = 1.0f;
  engine.enqueue_allreduce("cycle/lone", {&lone, 1, DataType::Float32}, ReduceOp::Sum).wait();
  CHECK(lone == static_cast<float>(ranks));
}

TEST_CASE("an idle engine wakes for a lone tensor, with a cycle time of 0 too", "[engine]") {
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  for (const double cycle_ms : {0.0, 5.0}) {
    INFO("cycle time " << cycle_ms << " ms");
    EngineOptions options;
    options.cycle_time_ms = cycle_ms;
    Engine engine(comm, options);
    for (int call = 0; call < 3; ++call) {
      // Long enough that nothing is in flight for several idle cycles (20 ms each).
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
      float lone = static_cast<float>(comm.rank() + call);
      engine.enqueue_allreduce("idle/lone", {&lone, 1, DataType::Float32}, ReduceOp::Sum).wait();
      CHECK(lone == static_cast<float>(ranks * (ranks - 1) / 2 + ranks * call));
    }
  }
}

TEST_CASE("an engine rejects a cycle time that is negative, not a number or too long", "[engine]") {
  Communicator comm = Communicator::world();
  for (const double bad : {-1.0, std::nan(""), 1e5}) {
    EngineOptions options;
    options.cycle_time_ms = bad;
    try {
      Engine engine(comm, options);
      FAIL("an engine was made with cycle_time_ms " << bad);
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains("cycle_time_ms"));
    }
  }
}

TEST_CASE("an engine rejects stall limits that are negative, not a number or too long",
          "[engine]") {
  Communicator comm = Communicator::world();
  for (const bool timeout : {false, true}) {
    for (const double bad : {-5.0, std::nan(""), 1e8}) {
      EngineOptions options;
      (timeout ? options.stall_timeout_s : options.stall_warning_s) = bad;
      const char* name = timeout ? "stall_timeout_s" : "stall_warning_s";
      try {
        Engine engine(comm, options);
        FAIL("an engine was made with " << name << " " << bad);
      } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::InvalidArgument);
        CHECK_THAT(e.what(), Catch::Contains(name));
      }
    }
  }
}

TEST_CASE("an engine rejects an unknown algorithm when it is made", "[engine]") {
  EngineOptions options;
  options.algorithm = static_cast<Algorithm>(99);
  try {
    Engine engine(Communicator::world(), options);
    FAIL("an engine was made with Algorithm value 99");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("EngineOptions::algorithm"));
  }
}

// The cycle's ready bits are one Iallreduce: ready on every rank (AND) beside ready on
// some (OR). A cached name that rank 0 submits first must wait for the others, however
// MPI splits the vector (engine_np3_ring_negotiation runs this under MPICH's ring
// Iallreduce, which hands the operation pieces of it).
TEST_CASE("a cached name ready on one rank waits for the others", "[engine][cycle_bits]") {
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  EngineOptions options;
  options.cycle_time_ms = 5;
  Engine engine(comm, options);
  const std::vector<std::string> names{"bits/a", "bits/b", "bits/c"};
  constexpr auto kLate = std::chrono::milliseconds(300);
  // Nanoseconds on the node's monotonic clock, which every rank of one machine shares.
  const auto now_ns = [] {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                      std::chrono::steady_clock::now().time_since_epoch())
                                      .count());
  };
  for (int step = 0; step < 3; ++step) {  // step 0 announces; later ones hit the cache
    if (comm.rank() != 0 && step > 0) std::this_thread::sleep_for(kLate);
    const long long submitted = now_ns();
    std::vector<float> values(names.size(), static_cast<float>(comm.rank() + 1 + step));
    std::vector<Handle> handles;
    for (std::size_t i = 0; i < names.size(); ++i) {
      handles.push_back(
          engine.enqueue_allreduce(names[i], {&values[i], 1, DataType::Float32}, ReduceOp::Sum));
    }
    for (auto& h : handles) h.wait();
    const long long completed = now_ns();
    const float expected = static_cast<float>(ranks * (ranks + 1) / 2 + ranks * step);
    for (std::size_t i = 0; i < names.size(); ++i) {
      INFO("step " << step << ", " << names[i]);
      CHECK(values[i] == expected);
    }
    // No rank can have its sums before the last rank submitted.
    long long last_submitted = 0;
    MPI_Allreduce(&submitted, &last_submitted, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    INFO("step " << step << ": completed " << (completed - last_submitted) / 1e6
                 << " ms after the last rank submitted");
    CHECK(completed >= last_submitted);
  }
}
