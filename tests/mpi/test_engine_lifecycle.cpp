// The fusion engine's life beyond its collectives: a tensor some ranks never
// submit (the stall warning, then the timeout), shutdown (pending work, from a
// completion callback, the default engine before MPI_Finalize), and the timeline
// file as Chrome-trace JSON.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "mpi/engine_support.hpp"
#include "mpi/test_support.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

using namespace concord;
using namespace concord::test;

namespace {

// Captures what this process writes to stderr while `body` runs.
template <typename Body>
std::string capture_stderr(Body&& body) {
  char path[] = "/tmp/concord-stderr-XXXXXX";
  const int fd = mkstemp(path);
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  body();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path);
  return text;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// "[2]" for 3 ranks: the last rank, as a stall message lists it.
std::string last_rank_list(int size) {
  return fmt::format("[{}]", size - 1);
}

// "[1, 2]" for 3 ranks: every rank but 0.
std::string all_but_rank0(int size) {
  std::vector<int> ranks;
  for (int r = 1; r < size; ++r) ranks.push_back(r);
  return fmt::format("[{}]", fmt::join(ranks, ", "));
}

}  // namespace

TEST_CASE("a tensor some ranks never submit: warning, then timeout", "[engine][stall]") {
  Communicator comm = Communicator::world();
  if (comm.size() < 2) return;
  EngineOptions options = quick();
  options.stall_warning_s = 0.2;
  options.stall_timeout_s = 0.6;
  std::string log;
  {
    Engine engine(comm, options);
    std::vector<float> v(16, 1.0f);
    // First a name everyone submits (so it is cached), then a step where the
    // last rank skips it (cached path) and a new name only rank 0 submits
    // (negotiation path).
    engine.enqueue_allreduce("cached", {v.data(), v.size(), DataType::Float32}, ReduceOp::Sum)
        .wait();
    const bool skip = comm.rank() == comm.size() - 1;
    log = capture_stderr([&] {
      std::vector<std::pair<std::string, Handle>> handles;
      if (!skip) {
        handles.emplace_back(
            "cached", engine.enqueue_allreduce("cached", {v.data(), v.size(), DataType::Float32},
                                               ReduceOp::Sum));
      }
      if (comm.rank() == 0) {
        handles.emplace_back(
            "lonely",
            engine.enqueue_allreduce("lonely", {v.data(), 4, DataType::Float32}, ReduceOp::Sum));
      }
      for (auto& [name, h] : handles) {
        try {
          h.wait();
          FAIL("a stalled tensor completed");
        } catch (const Error& e) {
          CHECK(e.code() == ErrorCode::Timeout);
          CHECK_THAT(e.what(), Catch::Matchers::Contains("did not submit it within 0.6 s"));
          CHECK_THAT(e.what(), Catch::Matchers::Contains(std::to_string(comm.size() - 1) + "]"));
          // The whole message, with exactly the missing ranks: the last one
          // for the cached name (found by a diagnosis of everyone's ready
          // bits), every rank but 0 for the announced one (from the registry).
          const std::string expected = fmt::format(
              "tensor '{}': ranks {} did not submit it within 0.6 s (CONCORD_STALL_TIMEOUT_S)",
              name, name == "cached" ? last_rank_list(comm.size()) : all_but_rank0(comm.size()));
          CHECK_THAT(e.what(), Catch::Matchers::Contains(expected));
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
    });
  }
  if (comm.rank() == 0) {
    using Catch::Matchers::Contains;
    CHECK_THAT(log, Contains("tensor 'cached' has waited") &&
                        Contains("tensor 'lonely' has waited") &&
                        Contains("CONCORD_STALL_WARNING_S"));
    // One warning per stalled tensor, however many cycles it waits, naming the
    // missing ranks.
    CHECK(occurrences(log, "tensor 'cached' has waited") == 1);
    CHECK(occurrences(log, "tensor 'lonely' has waited") == 1);
    CHECK(occurrences(log, "has waited") == 2);
    CHECK_THAT(log,
               Contains(fmt::format("ranks {} have not submitted it (CONCORD_STALL_WARNING_S)",
                                    last_rank_list(comm.size()))) &&
                   Contains(fmt::format("ranks {} have not submitted it (CONCORD_STALL_WARNING_S)",
                                        all_but_rank0(comm.size()))));
  }
}

TEST_CASE("shutdown fails pending work, is idempotent, and refuses new work", "[engine]") {
  Communicator comm = Communicator::world();
  Engine engine(comm, quick());
  std::vector<float> v(4, 1.0f);
  Handle pending;
  if (comm.rank() == 0 && comm.size() > 1) {
    pending =
        engine.enqueue_allreduce("never", {v.data(), v.size(), DataType::Float32}, ReduceOp::Sum);
  }
  // One rank's shutdown stops every rank's engine: enqueue first everywhere.
  MPI_Barrier(MPI_COMM_WORLD);
  engine.shutdown();
  engine.shutdown();
  if (pending.valid()) {
    CHECK_THROWS_MATCHES(pending.wait(), Error,
                         Catch::Matchers::Predicate<Error>(
                             [](const Error& e) { return e.code() == ErrorCode::Shutdown; }));
  }
  CHECK_THROWS_AS(
      engine.enqueue_allreduce("late", {v.data(), v.size(), DataType::Float32}, ReduceOp::Sum),
      Error);
}

TEST_CASE("shutdown from a completion callback on either engine thread", "[engine]") {
  Communicator comm = Communicator::world();
  // With Ring an allreduce completes on the packer thread (after unpacking), a
  // broadcast on the engine thread. Neither may wait for itself.
  for (const bool allreduce : {true, false}) {
    INFO((allreduce ? "allreduce (packer thread)" : "broadcast (engine thread)"));
    EngineOptions options = quick();
    options.algorithm = Algorithm::Ring;
    Engine engine(comm, options);
    std::vector<float> v(16, 1.0f);
    std::atomic<bool> succeeded{false};
    auto stop = [&](const Error* e) {
      engine.shutdown();  // requests the stop, returns at once
      succeeded = e == nullptr;
    };
    const TensorView view{v.data(), v.size(), DataType::Float32};
    Handle h = allreduce ? engine.enqueue_allreduce("s", view, ReduceOp::Sum, 1.0, 1.0, stop)
                         : engine.enqueue_broadcast("s", view, 0, stop);
    h.wait();
    CHECK(succeeded);
    CHECK(v[0] == (allreduce ? static_cast<float>(comm.size()) : 1.0f));
    CHECK_THROWS_MATCHES(engine.enqueue_allreduce("late", view, ReduceOp::Sum), Error,
                         Catch::Matchers::Predicate<Error>(
                             [](const Error& e) { return e.code() == ErrorCode::Shutdown; }));
    engine.shutdown();  // from here: joins the engine's threads
  }
}

TEST_CASE("the default engine: shut down explicitly, idempotently, before MPI_Finalize",
          "[engine]") {
  // mpi_main finalizes MPI itself, so the default engine must be gone first
  // (when concord initialised MPI, an exit handler shuts it down first).
  Communicator comm = Communicator::world();
  Engine& engine = default_engine();
  std::vector<float> v(8, 1.0f);
  engine.enqueue_allreduce("default/x", {v.data(), v.size(), DataType::Float32}, ReduceOp::Sum)
      .wait();
  CHECK(v[0] == static_cast<float>(comm.size()));
  shutdown_default_engine();
  shutdown_default_engine();
  CHECK_THROWS_MATCHES(default_engine(), Error,
                       Catch::Matchers::Predicate<Error>(
                           [](const Error& e) { return e.code() == ErrorCode::Shutdown; }));
}

namespace {

// Runs two allreduces with a timeline and returns rank 0's trace (null elsewhere).
nlohmann::json traced_step(Algorithm algorithm) {
  Communicator comm = Communicator::world();
  const std::string path = fmt::format("/tmp/concord-timeline-{}.json", getpid());
  {
    EngineOptions options = quick();
    options.timeline_path = path;
    options.algorithm = algorithm;
    Engine engine(comm, options);
    std::vector<float> a(100, 1.0f), b(50, 1.0f);
    auto h1 = engine.enqueue_allreduce("layer1/w", {a.data(), a.size(), DataType::Float32},
                                       ReduceOp::Sum);
    auto h2 = engine.enqueue_allreduce("layer1/b", {b.data(), b.size(), DataType::Float32},
                                       ReduceOp::Sum);
    h1.wait();
    h2.wait();
    CHECK(a[0] == static_cast<float>(comm.size()));
  }
  if (comm.rank() != 0) return nullptr;
  std::ifstream in(path);
  REQUIRE(in.good());
  nlohmann::json trace = nlohmann::json::parse(in);  // throws if not valid JSON
  std::remove(path.c_str());
  return trace;
}

void check_trace(const nlohmann::json& trace, std::vector<const char*> expected_phases) {
  REQUIRE(trace.is_array());
  std::set<std::string> phases;
  std::set<std::string> tracks;
  for (const auto& e : trace) {
    if (e["ph"] == "X") {
      phases.insert(e["name"].get<std::string>());
      CHECK(e["dur"].get<double>() >= 0);
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      tracks.insert(e["args"]["name"].get<std::string>());
    }
  }
  for (const char* phase : expected_phases) {
    INFO("phase " << phase);
    CHECK(phases.count(phase) == 1);
  }
  CHECK(tracks.count("layer1/w") == 1);
  CHECK(tracks.count("layer1/b") == 1);
}

}  // namespace

TEST_CASE("the timeline is valid Chrome-trace JSON with every phase", "[engine][timeline]") {
  // A flat algorithm: buckets go through a fusion buffer.
  nlohmann::json packed = traced_step(Algorithm::Ring);
  if (!packed.is_null()) check_trace(packed, {"NEGOTIATE", "QUEUE", "PACK", "REDUCE", "UNPACK"});
  // Auto on one node with several ranks: reduced in place through shared memory.
  nlohmann::json in_place = traced_step(Algorithm::Auto);
  if (!in_place.is_null()) check_trace(in_place, {"NEGOTIATE", "QUEUE", "REDUCE"});
}

TEST_CASE("a timeline rank 0 cannot open fails the engine on every rank at construction",
          "[engine][timeline]") {
  // Before, only rank 0's constructor failed, after the engine's communicators were
  // made; the other ranks' engines then waited for rank 0 in their negotiation until
  // the transport's deadline (30 minutes by default) and blamed a dead peer.
  Communicator comm = Communicator::world();
  EngineOptions options = quick();
  options.timeline_path = "/nonexistent-concord-dir/t.json";
  const auto start = std::chrono::steady_clock::now();
  try {
    Engine engine(comm, options);
    FAIL("the engine was made");
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.code() == ErrorCode::SystemError);
    if (comm.rank() == 0) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains("'/nonexistent-concord-dir/t.json'"));
    } else {
      CHECK_THAT(e.what(), Catch::Matchers::Contains("rank 0 could not open its timeline"));
    }
  }
  CHECK(seconds_since(start) < 10);
  // The ranks are still in step: an engine made after it works.
  Engine engine(comm, quick());
  float x = 1.0f;
  engine.enqueue_allreduce("after", {&x, 1, DataType::Float32}, ReduceOp::Sum).wait();
  CHECK(x == static_cast<float>(comm.size()));
}
