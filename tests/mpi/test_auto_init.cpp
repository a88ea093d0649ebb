// concord starts MPI when the application has not, and ends it at exit.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include <cstdint>
#include <vector>

TEST_CASE("Communicator::world() initialises MPI when nobody has") {
  int initialized = 1;
  MPI_Initialized(&initialized);
  REQUIRE(initialized == 0);
  concord::Communicator comm = concord::Communicator::world();
  MPI_Initialized(&initialized);
  CHECK(initialized == 1);
  std::int64_t rank = comm.rank();
  std::int64_t total = 0;
  concord::allreduce(&rank, &total, 1, concord::DataType::Int64, concord::ReduceOp::Sum, comm);
  CHECK(total == std::int64_t{comm.size()} * (comm.size() - 1) / 2);
}

// Left running on purpose: the process must still exit cleanly (exit code 0),
// the engine shut down before concord's MPI_Finalize runs. Before, its static
// destructor ran after MPI_Finalize and the engine thread crashed in MPI.
TEST_CASE("the default engine left running at exit stops before MPI is finalized") {
  concord::Communicator comm = concord::Communicator::world();
  std::vector<float> v(1000, 1.0f);
  concord::default_engine()
      .enqueue_allreduce("at-exit", {v.data(), v.size(), concord::DataType::Float32},
                         concord::ReduceOp::Sum)
      .wait();
  CHECK(v[999] == static_cast<float>(comm.size()));
}
