// The engine's Horovod-shaped operations under MPI: alltoall with uneven splits,
// reducescatter with rows the ranks do not divide, join (zeros from joined ranks,
// errors for what cannot run, the last rank), each against a reference computed
// here from every rank's inputs.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "mpi/engine_support.hpp"
#include "mpi/test_support.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace concord;
using namespace concord::test;

namespace {

// Rows rank `from` sends to rank `to` in the alltoall tests: uneven, with zeros.
std::size_t rows_between(int from, int to) {
  return static_cast<std::size_t>((from * 3 + to * 2) % 4);  // 0..3
}

// Element e of row j that rank `from` sends to `to`: distinct everywhere.
double alltoall_value(int from, int to, std::size_t j, std::size_t e, DataType dtype) {
  const double v = static_cast<double>(from * 16 + to * 4 + static_cast<int>(j * 2 + e) % 4);
  return dtype == DataType::UInt8 || dtype == DataType::Int8 ? std::fmod(v, 100.0) : v;
}

void expect_error(const Handle& h, ErrorCode code, const std::vector<std::string>& parts) {
  try {
    h.wait();
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == code);
    for (const auto& part : parts) CHECK_THAT(e.what(), Catch::Matchers::Contains(part));
  }
}

}  // namespace

TEST_CASE("alltoall with uneven splits, zero rows and several dtypes", "[engine][horovod]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int n = comm.size();
  Engine engine(comm, quick());
  const std::size_t row = 2;
  for (DataType dtype : {DataType::Float32, DataType::Int64, DataType::UInt8, DataType::Float16}) {
    const std::size_t esize = size_of(dtype);
    std::vector<std::size_t> send_rows;
    std::vector<std::byte> data;
    for (int to = 0; to < n; ++to) {
      send_rows.push_back(rows_between(rank, to));
      for (std::size_t j = 0; j < send_rows.back(); ++j) {
        for (std::size_t e = 0; e < row; ++e) {
          data.resize(data.size() + esize);
          store(data.data() + data.size() - esize, dtype, alltoall_value(rank, to, j, e, dtype));
        }
      }
    }
    Handle h = engine.enqueue_alltoall(fmt::format("a2a/{}", to_string(dtype)),
                                       {data.data(), data.size() / esize, dtype}, row, send_rows);
    const auto& out = h.output();
    const auto& dims = h.first_dims();
    REQUIRE(dims.size() == static_cast<std::size_t>(n));
    std::vector<double> expected;
    for (int from = 0; from < n; ++from) {
      CHECK(dims[static_cast<std::size_t>(from)] == rows_between(from, rank));
      for (std::size_t j = 0; j < rows_between(from, rank); ++j) {
        for (std::size_t e = 0; e < row; ++e) {
          expected.push_back(alltoall_value(from, rank, j, e, dtype));
        }
      }
    }
    REQUIRE(out.size() == expected.size() * esize);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CHECK(load(out.data() + i * esize, dtype) == expected[i]);
    }
  }
  // No send_rows: an even split.
  std::vector<std::int32_t> even(static_cast<std::size_t>(2 * n));
  for (std::size_t i = 0; i < even.size(); ++i) even[i] = rank * 100 + static_cast<int>(i);
  Handle h =
      engine.enqueue_alltoall("a2a/even", {even.data(), even.size(), DataType::Int32}, 1, {});
  std::vector<std::int32_t> got(static_cast<std::size_t>(2 * n));
  REQUIRE(h.output().size() == got.size() * 4);
  std::memcpy(got.data(), h.output().data(), h.output().size());
  for (int from = 0; from < n; ++from) {
    CHECK(h.first_dims()[static_cast<std::size_t>(from)] == 2);
    for (int k = 0; k < 2; ++k)
      CHECK(got[static_cast<std::size_t>(from * 2 + k)] == from * 100 + rank * 2 + k);
  }
}

TEST_CASE("reducescatter with rows the ranks do not divide, every op", "[engine][horovod]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int n = comm.size();
  Engine engine(comm, quick());
  const std::size_t row = 3;
  const std::size_t rows = static_cast<std::size_t>(2 * n + 1);  // remainder 1 (none at 1 rank)
  // Horovod's split: the first rows % n ranks get one row more.
  std::vector<std::size_t> blocks;
  for (int r = 0; r < n; ++r) {
    blocks.push_back(rows / static_cast<std::size_t>(n) +
                     (static_cast<std::size_t>(r) < rows % static_cast<std::size_t>(n) ? 1 : 0));
  }
  std::size_t first_row = 0;
  for (int r = 0; r < rank; ++r) first_row += blocks[static_cast<std::size_t>(r)];
  for (DataType dtype : {DataType::Float32, DataType::Int32, DataType::Float64}) {
    for (ReduceOp op : all_ops()) {
      if (!is_supported(dtype, op)) continue;
      const std::size_t esize = size_of(dtype);
      std::vector<std::byte> data(rows * row * esize);
      for (std::size_t i = 0; i < rows * row; ++i) {
        store(data.data() + i * esize, dtype, input_value(rank, i, dtype, op));
      }
      const std::vector<std::byte> before = data;
      const double post = is_floating_point(dtype) ? 0.5 : 1.0;
      Handle h =
          engine.enqueue_reducescatter(fmt::format("rs/{}/{}", to_string(dtype), to_string(op)),
                                       {data.data(), rows * row, dtype}, row, op, 1.0, post);
      const auto& out = h.output();
      CHECK(h.first_dims() == blocks);
      REQUIRE(out.size() == blocks[static_cast<std::size_t>(rank)] * row * esize);
      for (std::size_t k = 0; k < out.size() / esize; ++k) {
        const std::size_t i = first_row * row + k;
        const double expected = reference_value(n, i, dtype, op) * post;
        const double got = load(out.data() + k * esize, dtype);
        if (op == ReduceOp::Avg) {
          CHECK(std::fabs(got - expected) <= avg_tolerance(dtype, expected));
        } else {
          CHECK(got == expected);
        }
      }
      CHECK(data == before);  // the input is left as it was
    }
  }
}

TEST_CASE("join: joined ranks add zeros until every rank joined", "[engine][horovod]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int n = comm.size();
  Engine engine(comm, quick());
  const std::size_t count = 37;
  auto value = [](int r, int step, std::size_t i) {
    return static_cast<float>(r + 1) * 0.5f + static_cast<float>(step) + static_cast<float>(i % 5);
  };
  // Rank r takes r + 1 steps, then joins; the others go on.
  const int my_steps = rank + 1;
  for (int step = 0; step < n; ++step) {
    if (step == my_steps) break;
    std::vector<float> a(count), b(count);
    for (std::size_t i = 0; i < count; ++i) a[i] = b[i] = value(rank, step, i);
    Handle ha =
        engine.enqueue_allreduce("join/sum", {a.data(), count, DataType::Float32}, ReduceOp::Sum);
    auto hb = engine.enqueue_grouped_allreduce(
        {"join/avg"}, {TensorView{b.data(), count, DataType::Float32}}, ReduceOp::Avg);
    ha.wait();
    hb[0].wait();
    for (std::size_t i = 0; i < count; ++i) {
      // Ranks still in: those with more than `step` steps (r + 1 > step).
      float sum = 0;
      for (int r = step; r < n; ++r) sum += value(r, step, i);
      CHECK(a[i] == sum);
      CHECK(std::fabs(b[i] - sum / static_cast<float>(n)) <= 1e-5f * std::fabs(sum));
    }
  }
  // Broadcasts fail while a rank has joined: rank n-1's last step ran with
  // zeros from every other rank, so they have all joined by now.
  if (n > 1 && rank == n - 1) {
    std::vector<float> w(4, 1.0f);
    expect_error(engine.enqueue_broadcast("join/bcast", {w.data(), w.size(), DataType::Float32}, 0),
                 ErrorCode::InvalidArgument, {"join/bcast", "broadcast", "have joined"});
  }
  Handle joined = engine.enqueue_join();
  const auto& out = joined.output();
  REQUIRE(out.size() == 4);
  std::int32_t last = -1;
  std::memcpy(&last, out.data(), 4);
  if (n > 1) CHECK(last == n - 1);
  if (n == 1) CHECK(last == 0);
  // The engine works normally again, and join can be called again.
  std::vector<float> v(count, 1.0f);
  engine.enqueue_allreduce("join/sum", {v.data(), count, DataType::Float32}, ReduceOp::Sum).wait();
  CHECK(v[0] == static_cast<float>(n));
  std::vector<float> w(4, rank == 0 ? 7.0f : 0.0f);
  engine.enqueue_broadcast("join/bcast", {w.data(), w.size(), DataType::Float32}, 0).wait();
  CHECK(w[3] == 7.0f);
  engine.enqueue_join().wait();
}

TEST_CASE("alltoall, reducescatter and join errors", "[engine][horovod][errors]") {
  Communicator comm = Communicator::world();
  const int n = comm.size();
  Engine engine(comm, quick());
  std::vector<float> t(static_cast<std::size_t>(3 * n + 1) * 2, 1.0f);
  const TensorView view{t.data(), t.size(), DataType::Float32};
  using Catch::Matchers::Contains;
  auto rows = std::vector<std::size_t>(static_cast<std::size_t>(n), 3);
  CHECK_THROWS_WITH(engine.enqueue_alltoall("e/sum", view, 2, rows),
                    Contains("e/sum") && Contains("add up to"));
  CHECK_THROWS_WITH(engine.enqueue_alltoall("e/count", view, 2, {1}),
                    n == 1 ? Contains("add up to") : Contains("one send_rows entry per rank"));
  if (n > 1) {
    CHECK_THROWS_WITH(engine.enqueue_alltoall("e/even", view, 2, {}),
                      Contains("e/even") && Contains("evenly"));
  }
  CHECK_THROWS_WITH(engine.enqueue_alltoall("e/row", view, 3, {}), Contains("multiple of"));
  // Not whole rows, and the one whole row does not split over n > 1 ranks: the
  // count is what is wrong.
  CHECK_THROWS_WITH(engine.enqueue_alltoall("e/row_uneven", view, t.size() - 1, {}),
                    Contains("e/row_uneven") && Contains("multiple of"));
  CHECK_THROWS_WITH(engine.enqueue_reducescatter("e/rs", view, 0, ReduceOp::Sum),
                    Contains("row_elements must be > 0"));
  std::vector<std::int32_t> ints(4);
  CHECK_THROWS_WITH(
      engine.enqueue_reducescatter("e/int", {ints.data(), 4, DataType::Int32}, 1, ReduceOp::Avg),
      Contains("not defined for int32"));
  CHECK_THROWS_WITH(engine.enqueue_allreduce("concord/join", view, ReduceOp::Sum),
                    Contains("reserved for join"));
  // Rank 0's join stays in flight until every rank has joined: the others join
  // only after rank 0 has tried a second one (else, on a slow run, the join
  // could already be over when rank 0 tries).
  if (comm.rank() == 0) {
    Handle j = engine.enqueue_join();
    if (n > 1) CHECK_THROWS_WITH(engine.enqueue_join(), Contains("already in flight"));
    MPI_Barrier(MPI_COMM_WORLD);
    j.wait();
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    engine.enqueue_join().wait();
  }
}

TEST_CASE("while a rank has joined, allgather, alltoall and reducescatter fail on the others",
          "[engine][horovod][errors]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int n = comm.size();
  if (n < 2) return;
  Engine engine(comm, quick());
  if (rank == 0) {
    engine.enqueue_join().wait();
    return;
  }
  std::vector<float> t(static_cast<std::size_t>(2 * n), 1.0f);
  // Rank 0's join is agreed in some cycle; wait for it through an allreduce
  // that rank 0 fills with zeros.
  std::vector<float> probe(1, 1.0f);
  engine.enqueue_allreduce("j/probe", {probe.data(), 1, DataType::Float32}, ReduceOp::Sum).wait();
  CHECK(probe[0] == static_cast<float>(n - 1));
  expect_error(engine.enqueue_allgather("j/ag", {t.data(), t.size(), DataType::Float32}, 2),
               ErrorCode::InvalidArgument, {"j/ag", "allgather", "ranks [0", "have joined"});
  expect_error(engine.enqueue_alltoall("j/a2a", {t.data(), t.size(), DataType::Float32}, 1, {}),
               ErrorCode::InvalidArgument, {"j/a2a", "alltoall", "ranks [0", "have joined"});
  expect_error(engine.enqueue_reducescatter("j/rs", {t.data(), t.size(), DataType::Float32}, 1,
                                            ReduceOp::Sum),
               ErrorCode::InvalidArgument, {"j/rs", "reducescatter", "ranks [0", "have joined"});
  engine.enqueue_join().wait();
}

TEST_CASE(
    "join: a joining rank's own request fails with a mismatch when another rank "
    "changes the name's signature, instead of hanging",
    "[engine][horovod][errors]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int n = comm.size();
  if (n < 2) return;
  Engine engine(comm, quick());
  // Cached everywhere as 8 floats.
  std::vector<float> x(16, 1.0f);
  engine.enqueue_allreduce("jc/x", {x.data(), 8, DataType::Float32}, ReduceOp::Sum).wait();
  // Returns once `h` completed; fails the test (instead of hanging) after 20 s.
  auto settled = [](const Handle& h) {
    for (int i = 0; i < 20000 && !h.test(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(h.test());
    return h;
  };
  if (rank == 0) {
    // Its request waits on the others (cached, 8 floats), then it joins.
    Handle mine = engine.enqueue_allreduce("jc/x", {x.data(), 8, DataType::Float32}, ReduceOp::Sum);
    Handle joined = engine.enqueue_join();
    expect_error(settled(mine), ErrorCode::Mismatch,
                 {"jc/x", "submitted it differently", "count=8", "count=16"});
    settled(joined);
    return;
  }
  // Once rank 0's join is agreed (this allreduce gets its zeros), the others
  // submit the name with 16 floats.
  std::vector<float> probe(1, 1.0f);
  engine.enqueue_allreduce("jc/probe", {probe.data(), 1, DataType::Float32}, ReduceOp::Sum).wait();
  CHECK(probe[0] == static_cast<float>(n - 1));
  Handle theirs =
      engine.enqueue_allreduce("jc/x", {x.data(), 16, DataType::Float32}, ReduceOp::Sum);
  expect_error(settled(theirs), ErrorCode::Mismatch,
               {"jc/x", "submitted it differently", "count=8", "count=16"});
  settled(engine.enqueue_join());
}
