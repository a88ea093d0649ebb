// concord starts MPI when the application has not, and ends it at exit.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include <cstdint>

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
