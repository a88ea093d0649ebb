// The fusion engine under MPI: randomised stress against a serial reference,
// grouped enqueue, scaling, broadcast/allgather, and the error paths (mismatch,
// duplicate, stall warning and timeout, shutdown), plus the timeline file.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "mpi/test_support.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace concord;
using namespace concord::test;

namespace {

struct Tensor {
  std::string name;
  DataType dtype;
  std::size_t count;
  std::vector<std::byte> data;
};

// The same list of tensors on every rank (same seed), each filled with this
// rank's inputs.
std::vector<Tensor> make_tensors(int n, int rank, unsigned seed, const std::string& prefix) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dtype_pick(0, 7);
  std::uniform_int_distribution<int> size_class(0, 9);
  std::vector<Tensor> tensors;
  for (int i = 0; i < n; ++i) {
    const auto dtype = static_cast<DataType>(dtype_pick(gen));
    const int cls = size_class(gen);
    // Mostly small (biases), some medium, a few large (weights).
    const std::size_t count = cls < 6 ? std::uniform_int_distribution<std::size_t>(0, 64)(gen)
                              : cls < 9
                                  ? std::uniform_int_distribution<std::size_t>(65, 4096)(gen)
                                  : std::uniform_int_distribution<std::size_t>(4097, 70000)(gen);
    Tensor t{fmt::format("{}{}", prefix, i), dtype, count,
             std::vector<std::byte>(count * size_of(dtype))};
    for (std::size_t j = 0; j < count; ++j) {
      store(&t.data[j * size_of(dtype)], dtype, input_value(rank, j + i, dtype, ReduceOp::Sum));
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

void check_sum(const Tensor& t, int ranks, int index) {
  const std::size_t esize = size_of(t.dtype);
  for (std::size_t j = 0; j < t.count; ++j) {
    const double expected =
        reference_value(ranks, j + static_cast<std::size_t>(index), t.dtype, ReduceOp::Sum);
    const double got = load(&t.data[j * esize], t.dtype);
    if (got != expected) {
      FAIL_CHECK(t.name << " (" << to_string(t.dtype) << ", count " << t.count << ") element " << j
                        << ": got " << got << ", expected " << expected);
      return;
    }
  }
}

// Waits for `h`, which must fail with Mismatch; the message names the tensor
// and each rank's signature.
void expect_mismatch(const Handle& h, const std::string& tensor, const std::string& rank0,
                     const std::string& rank1) {
  try {
    h.wait();
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Mismatch);
    using Catch::Matchers::Contains;
    CHECK_THAT(e.what(),
               Contains(tensor) && Contains("rank 0: " + rank0) && Contains("rank 1: " + rank1));
  }
}

EngineOptions quick() {
  EngineOptions o;
  o.cycle_time_ms = 0.5;
  return o;
}

}  // namespace

TEST_CASE("1000 random tensors in random order from random threads", "[engine]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  // Auto reduces buckets in place through shared memory (several ranks on one
  // node); Ring packs them into fusion buffers on the packer thread, except
  // tensors of at least the in-place size (default 256 KiB: a few of these; 1 KiB:
  // most of the medium and large ones, between fused small ones; 0: none).
  struct Variant {
    std::size_t threshold;
    Algorithm algorithm;
    std::optional<std::size_t> in_place_bytes;
  };
  const Variant variants[] = {{std::size_t{64} << 20, Algorithm::Auto, {}},
                              {4096, Algorithm::Auto, {}},
                              {0, Algorithm::Auto, {}},
                              {std::size_t{64} << 20, Algorithm::Ring, {}},
                              {std::size_t{64} << 20, Algorithm::Ring, 1024},
                              {4096, Algorithm::Ring, 0}};
  for (const auto& [threshold, algorithm, in_place_bytes] : variants) {
    INFO("fusion threshold " << threshold << ", " << to_string(algorithm) << ", in place from "
                             << in_place_bytes.value_or(256 * 1024));
    EngineOptions options = quick();
    options.fusion_threshold = threshold;
    options.algorithm = algorithm;
    options.fusion_in_place_bytes = in_place_bytes;
    Engine engine(comm, options);
    const std::string prefix = fmt::format("t{}-{}-{}/", threshold, to_string(algorithm),
                                           in_place_bytes.value_or(256 * 1024));
    auto tensors = make_tensors(1000, rank, 1234, prefix);
    std::vector<int> order(tensors.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::mt19937 gen(static_cast<unsigned>(77 + rank * 1000 + static_cast<int>(threshold % 997) +
                                           static_cast<int>(algorithm)));
    std::shuffle(order.begin(), order.end(), gen);

    constexpr int kThreads = 4;
    std::vector<Handle> handles(tensors.size());
    std::vector<std::thread> threads;
    std::atomic<int> callbacks{0};
    for (int th = 0; th < kThreads; ++th) {
      threads.emplace_back([&, th] {
        for (std::size_t k = static_cast<std::size_t>(th); k < order.size(); k += kThreads) {
          Tensor& t = tensors[static_cast<std::size_t>(order[k])];
          handles[static_cast<std::size_t>(order[k])] =
              engine.enqueue_allreduce(t.name, TensorView{t.data.data(), t.count, t.dtype},
                                       ReduceOp::Sum, 1.0, 1.0, [&](const Error* e) {
                                         if (e == nullptr) ++callbacks;
                                       });
        }
      });
    }
    for (auto& th : threads) th.join();
    for (auto& h : handles) h.wait();
    CHECK(callbacks == static_cast<int>(tensors.size()));
    for (std::size_t i = 0; i < tensors.size(); ++i)
      check_sum(tensors[i], comm.size(), static_cast<int>(i));
  }
}

TEST_CASE("the same names again, step after step, through the cache", "[engine]") {
  Communicator comm = Communicator::world();
  Engine engine(comm, quick());
  for (int step = 0; step < 5; ++step) {
    auto tensors = make_tensors(50, comm.rank(), 99, "step/");
    std::vector<Handle> handles;
    std::vector<int> order(tensors.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::mt19937 gen(static_cast<unsigned>(step * 31 + comm.rank()));
    std::shuffle(order.begin(), order.end(), gen);
    for (int i : order) {
      Tensor& t = tensors[static_cast<std::size_t>(i)];
      handles.push_back(
          engine.enqueue_allreduce(t.name, {t.data.data(), t.count, t.dtype}, ReduceOp::Sum));
    }
    for (auto& h : handles) h.wait();
    for (std::size_t i = 0; i < tensors.size(); ++i)
      check_sum(tensors[i], comm.size(), static_cast<int>(i));
  }
}

TEST_CASE("grouped allreduce, Avg and scale factors", "[engine]") {
  Communicator comm = Communicator::world();
  const int n = comm.size();
  Engine engine(comm, quick());
  std::vector<float> a(100, 1.0f), b(7, 2.0f), c(33, 3.0f);
  auto handles = engine.enqueue_grouped_allreduce({"g/a", "g/b", "g/c"},
                                                  {{a.data(), a.size(), DataType::Float32},
                                                   {b.data(), b.size(), DataType::Float32},
                                                   {c.data(), c.size(), DataType::Float32}},
                                                  ReduceOp::Avg);
  for (auto& h : handles) h.wait();
  CHECK(std::all_of(a.begin(), a.end(), [](float v) { return v == 1.0f; }));
  CHECK(std::all_of(b.begin(), b.end(), [](float v) { return v == 2.0f; }));
  CHECK(std::all_of(c.begin(), c.end(), [](float v) { return v == 3.0f; }));

  std::vector<double> d(10, 1.0);
  engine
      .enqueue_allreduce("scaled", {d.data(), d.size(), DataType::Float64}, ReduceOp::Sum, 4.0, 0.5)
      .wait();
  CHECK(d[0] == 2.0 * n);

  std::vector<std::int32_t> m(5, comm.rank());
  engine.enqueue_allreduce("max", {m.data(), m.size(), DataType::Int32}, ReduceOp::Max).wait();
  CHECK(m[4] == n - 1);
}

TEST_CASE("broadcast and allgather with uneven first dimensions", "[engine]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int n = comm.size();
  Engine engine(comm, quick());
  const int root = n - 1;
  std::vector<std::int64_t> w(1000, rank == root ? 42 : -1);
  engine.enqueue_broadcast("weights", {w.data(), w.size(), DataType::Int64}, root).wait();
  CHECK(std::all_of(w.begin(), w.end(), [](std::int64_t v) { return v == 42; }));

  const std::size_t row = 3;
  const std::size_t rows = static_cast<std::size_t>(rank) + 1;  // 1, 2, 3, ...
  std::vector<float> mine(rows * row);
  for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(rank * 100 + i);
  Handle h = engine.enqueue_allgather("rows", {mine.data(), mine.size(), DataType::Float32}, row);
  const auto& out = h.output();
  const auto& dims = h.first_dims();
  REQUIRE(dims.size() == static_cast<std::size_t>(n));
  std::vector<float> expected;
  for (int r = 0; r < n; ++r) {
    CHECK(dims[static_cast<std::size_t>(r)] == static_cast<std::size_t>(r + 1));
    for (std::size_t i = 0; i < (static_cast<std::size_t>(r) + 1) * row; ++i) {
      expected.push_back(static_cast<float>(r * 100 + static_cast<int>(i)));
    }
  }
  REQUIRE(out.size() == expected.size() * sizeof(float));
  CHECK(std::memcmp(out.data(), expected.data(), out.size()) == 0);
}

TEST_CASE("a name with different counts on two ranks fails on every rank", "[engine][errors]") {
  Communicator comm = Communicator::world();
  if (comm.size() < 2) return;
  Engine engine(comm, quick());
  std::vector<float> v(comm.rank() == 1 ? 12 : 10, 1.0f);
  expect_mismatch(
      engine.enqueue_allreduce("grad/w", {v.data(), v.size(), DataType::Float32}, ReduceOp::Sum),
      "grad/w", "allreduce float32 sum count=10", "allreduce float32 sum count=12");
  // The engine goes on working, and the name can be used again.
  std::vector<float> u(4, 1.0f);
  engine.enqueue_allreduce("grad/w", {u.data(), u.size(), DataType::Float32}, ReduceOp::Sum).wait();
  CHECK(u[0] == static_cast<float>(comm.size()));
}

TEST_CASE("a cached name submitted differently in another cycle fails on every rank",
          "[engine][errors]") {
  // Rank 0 changes the count of a cached name; the others keep the cached
  // signature and submit it in a later (or earlier) cycle. Once this hung: the
  // late ranks used the cached bit while rank 0 waited for their announcement.
  Communicator comm = Communicator::world();
  if (comm.size() < 2) return;
  EngineOptions options = quick();
  options.stall_timeout_s = 10;  // a regression fails with Timeout instead of hanging
  Engine engine(comm, options);
  const bool changed = comm.rank() == 0;
  for (const bool changed_first : {true, false}) {
    INFO((changed_first ? "rank 0 submits first" : "rank 0 submits last"));
    std::vector<float> v(10, 1.0f);
    engine.enqueue_allreduce("w", {v.data(), v.size(), DataType::Float32}, ReduceOp::Sum).wait();
    std::vector<float> u(changed ? 12 : 10, 1.0f);
    // Many cycles apart (a cycle is 0.5 ms).
    if (changed != changed_first) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    expect_mismatch(
        engine.enqueue_allreduce("w", {u.data(), u.size(), DataType::Float32}, ReduceOp::Sum),
        "tensor 'w'", "allreduce float32 sum count=12", "allreduce float32 sum count=10");
    // The engine goes on, and the cached name still works.
    std::fill(v.begin(), v.end(), 1.0f);
    engine.enqueue_allreduce("w", {v.data(), v.size(), DataType::Float32}, ReduceOp::Sum).wait();
    CHECK(v[9] == static_cast<float>(comm.size()));
  }
}

TEST_CASE("an allocation that throws fails the handles, not the process", "[engine][errors]") {
  // Two tensors of 2^62 bytes fused into one bucket need a 2^63-byte fusion
  // buffer: more than a std::vector can hold, so resizing it throws
  // std::length_error before allocating anything, on every rank alike. Their
  // data is never read.
  Communicator comm = Communicator::world();
  EngineOptions options = quick();
  options.algorithm = Algorithm::Ring;  // buckets go through the fusion buffer
  options.fusion_threshold = std::numeric_limits<std::size_t>::max();
  options.fusion_in_place_bytes = 0;  // large tensors are packed too
  Engine engine(comm, options);
  std::int8_t dummy = 0;
  const std::size_t huge = std::size_t{1} << 62;
  auto handles = engine.enqueue_grouped_allreduce(
      {"huge/a", "huge/b"}, {{&dummy, huge, DataType::Int8}, {&dummy, huge, DataType::Int8}},
      ReduceOp::Sum);
  for (auto& h : handles) {
    try {
      h.wait();
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::SystemError);
      CHECK_THAT(e.what(), Catch::Matchers::Contains("cannot allocate"));
    }
  }
  // The engine goes on.
  std::vector<float> a(10, 1.0f), b(20, 1.0f);
  auto ok = engine.enqueue_grouped_allreduce(
      {"small/a", "small/b"},
      {{a.data(), a.size(), DataType::Float32}, {b.data(), b.size(), DataType::Float32}},
      ReduceOp::Sum);
  for (auto& h : ok) h.wait();
  CHECK(a[0] == static_cast<float>(comm.size()));
  CHECK(b[19] == static_cast<float>(comm.size()));
}

TEST_CASE("a name enqueued twice while in flight is an error", "[engine][errors]") {
  Communicator comm = Communicator::world();
  Engine engine(comm, quick());
  std::vector<float> a(8, 1.0f), b(8, 1.0f);
  Handle h =
      engine.enqueue_allreduce("dup", {a.data(), a.size(), DataType::Float32}, ReduceOp::Sum);
  CHECK_THROWS_MATCHES(
      engine.enqueue_allreduce("dup", {b.data(), b.size(), DataType::Float32}, ReduceOp::Sum),
      Error, Catch::Matchers::Predicate<Error>([](const Error& e) {
        return e.code() == ErrorCode::InvalidArgument &&
               std::string(e.what()).find("'dup' is already in flight") != std::string::npos;
      }));
  CHECK_THROWS_AS(
      engine.enqueue_grouped_allreduce(
          {"x", "x"}, {{a.data(), 1, DataType::Float32}, {b.data(), 1, DataType::Float32}},
          ReduceOp::Sum),
      Error);
  h.wait();
  CHECK_THROWS_AS(
      engine.enqueue_allreduce("i", {a.data(), a.size(), DataType::Int32}, ReduceOp::Avg), Error);
}

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
