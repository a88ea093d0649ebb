// Communicator: sizes, topology (physical or virtual nodes) and sub-communicators.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

TEST_CASE("world communicator matches MPI_COMM_WORLD", "[communicator]") {
  concord::Communicator comm = concord::Communicator::world();
  int rank = -1;
  int size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(comm.rank() == rank);
  CHECK(comm.size() == size);
  int result = MPI_UNEQUAL;
  MPI_Comm_compare(comm.mpi_comm(), MPI_COMM_WORLD, &result);
  CHECK(result == MPI_CONGRUENT);  // a duplicate, not the same handle
}

TEST_CASE("topology: all test ranks share one machine, optionally split into virtual nodes",
          "[communicator]") {
  concord::Communicator comm = concord::Communicator::world();
  const char* env = std::getenv("CONCORD_VIRTUAL_NODES");
  const int k = env ? std::atoi(env) : 1;
  const int p = comm.size();
  // Expected layout: consecutive ranks per virtual node, sizes differing by one.
  const int node = comm.rank() * k / p;
  int first = 0;
  while (first * k / p < node) ++first;
  int last = first;
  while (last < p && last * k / p == node) ++last;
  CHECK(comm.num_nodes() == k);
  CHECK(comm.node() == node);
  CHECK(comm.local_size() == last - first);
  CHECK(comm.local_rank() == comm.rank() - first);
}

TEST_CASE("a communicator over a split of the world reduces within its group", "[communicator]") {
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half);
  {
    concord::Communicator comm(half);
    std::int64_t mine = world_rank;
    std::int64_t total = 0;
    concord::allreduce(&mine, &total, 1, concord::DataType::Int64, concord::ReduceOp::Sum, comm);
    std::int64_t expected = 0;
    for (int r = world_rank % 2; r < world_size; r += 2) expected += r;
    CHECK(total == expected);
    CHECK(comm.size() == (world_size + 1 - world_rank % 2) / 2);
  }
  MPI_Comm_free(&half);
}

TEST_CASE("copies of a communicator share one duplicate", "[communicator]") {
  concord::Communicator a = concord::Communicator::world();
  concord::Communicator b = a;
  CHECK(a.mpi_comm() == b.mpi_comm());
  CHECK(concord::Communicator::world().mpi_comm() == a.mpi_comm());
}

TEST_CASE("MPI_COMM_NULL is rejected", "[communicator]") {
  CHECK_THROWS_AS(concord::Communicator(MPI_COMM_NULL), concord::Error);
}

TEST_CASE("an intercommunicator is rejected, naming what to do", "[communicator]") {
  int world_rank = 0;
  int world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_size < 2) return;
  // Even and odd ranks, bridged by their leaders (world ranks 0 and 1).
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half);
  MPI_Comm inter = MPI_COMM_NULL;
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, world_rank % 2 == 0 ? 1 : 0, 7, &inter);
  try {
    concord::Communicator comm(inter);
    FAIL("an intercommunicator was taken");
  } catch (const concord::Error& e) {
    CHECK(e.code() == concord::ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Matchers::Contains("intercommunicator") &&
                             Catch::Matchers::Contains("MPI_Intercomm_merge"));
  }
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
}

// Run alone (ctest mpi_np2_too_many_virtual_nodes, CONCORD_VIRTUAL_NODES=3): every
// rank gets the error, none is left waiting in a split.
TEST_CASE("more virtual nodes than ranks on a node is an error on every rank",
          "[.][virtual_nodes_too_many]") {
  try {
    concord::Communicator comm(MPI_COMM_WORLD);
    FAIL("no error with " << std::getenv("CONCORD_VIRTUAL_NODES") << " virtual nodes");
  } catch (const concord::Error& e) {
    CHECK(e.code() == concord::ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Matchers::Contains("each virtual node needs at least one rank"));
  }
}
