// The fusion engine under MPI: randomised stress against a serial reference,
// grouped enqueue, scaling, broadcast/allgather, and the error paths (mismatch,
// duplicate, an allocation that throws). The stall warning and timeout, shutdown
// and the timeline: test_engine_lifecycle.cpp.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "mpi/engine_support.hpp"
#include "mpi/test_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

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

TEST_CASE("an empty group completes at once, its callback called once", "[engine]") {
  Engine engine(Communicator::world(), quick());
  std::atomic<int> calls{0};
  std::atomic<bool> failed{false};
  const auto handles =
      engine.enqueue_grouped_allreduce({}, {}, ReduceOp::Sum, 1.0, 1.0, [&](const Error* error) {
        failed = error != nullptr;
        ++calls;
      });
  CHECK(handles.empty());
  CHECK(calls == 1);
  CHECK_FALSE(failed);
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
