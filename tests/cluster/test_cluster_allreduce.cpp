// The allreduce across real (namespace) hosts: every algorithm on a
// representative set of dtypes x ops x counts, against the serial reference of
// tests/mpi/test_support.hpp (computed from inputs every rank can derive), and
// the topology concord sees: one node per host, named as MPI names the hosts.
// Run by tests/cluster/run-ci at 2x2, 1+2+1 and 4x1 ranks per host.
#include <catch2/catch.hpp>

#include <mpi.h>
#include <concord/concord.hpp>

#include "mpi/test_support.hpp"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace concord;
using namespace concord::test;

struct Case {
  DataType dtype;
  ReduceOp op;
};

// Every dtype family once (8/32/64-bit integers, half, bfloat16, float, double)
// and every op at least twice; exhaustive products stay in the one-host suite.
const std::vector<Case>& cases() {
  static const std::vector<Case> v{
      {DataType::Float32, ReduceOp::Sum},  {DataType::Float64, ReduceOp::Max},
      {DataType::BFloat16, ReduceOp::Avg}, {DataType::Float16, ReduceOp::Sum},
      {DataType::Int32, ReduceOp::Min},    {DataType::Int64, ReduceOp::Prod},
      {DataType::Int8, ReduceOp::Max},     {DataType::Float32, ReduceOp::Avg}};
  return v;
}

// 0, 1, odd, and past one shared-memory region (256 KiB by default: 65537
// floats is 4 bytes over); the largest only for float32 sum.
std::vector<std::size_t> counts_for(const Case& c) {
  std::vector<std::size_t> counts{0, 1, 7, 1023, 65537};
  if (c.dtype == DataType::Float32 && c.op == ReduceOp::Sum) counts.push_back((1u << 18) + 3);
  return counts;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  return {name, static_cast<std::size_t>(length)};
}

}  // namespace

TEST_CASE("concord sees one node per host, grouped as MPI names the hosts", "[cluster]") {
  Communicator comm = Communicator::world();
  const char* expected = std::getenv("CONCORD_CLUSTER_EXPECT_HOSTS");
  REQUIRE(expected != nullptr);
  CHECK(comm.num_nodes() == std::atoi(expected));
  // Ranks share a node exactly when they share a host name.
  const std::string mine = processor_name();
  const int node = comm.node();
  for (int r = 0; r < comm.size(); ++r) {
    char other[MPI_MAX_PROCESSOR_NAME] = {};
    int other_node = node;
    if (r == comm.rank()) mine.copy(other, mine.size());
    MPI_Bcast(other, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, r, MPI_COMM_WORLD);
    MPI_Bcast(&other_node, 1, MPI_INT, r, MPI_COMM_WORLD);
    INFO("rank " << comm.rank() << " on " << mine << " (node " << node << ") vs rank " << r
                 << " on " << other << " (node " << other_node << ")");
    CHECK((mine == other) == (node == other_node));
  }
}

TEST_CASE("allreduce across hosts matches a serial reference", "[cluster][matrix]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int ranks = comm.size();
  bool in_place = false;
  for (const Case& c : cases()) {
    const std::size_t esize = size_of(c.dtype);
    for (std::size_t count : counts_for(c)) {
      const ReferenceCase ref(rank, ranks, count, c.dtype, c.op);
      for (Algorithm algorithm : all_algorithms()) {
        for (std::size_t segment : {std::size_t{0}, std::size_t{1024}}) {
          if (segment != 0 && algorithm != Algorithm::Ring) continue;
          in_place = !in_place;  // both, alternating, so each pair sees both over the matrix
          INFO("ranks=" << ranks << " dtype=" << to_string(c.dtype) << " op=" << to_string(c.op)
                        << " count=" << count << " algorithm=" << to_string(algorithm)
                        << " segment=" << segment << " in_place=" << in_place);
          std::vector<std::byte> send = ref.input;
          std::vector<std::byte> recv(count * esize, std::byte{0x5a});
          AllreduceOptions options;
          options.algorithm = algorithm;
          options.ring_segment_bytes = segment;
          if (in_place) {
            allreduce(send.data(), send.data(), count, c.dtype, c.op, comm, options);
            recv.swap(send);
          } else {
            allreduce(send.data(), recv.data(), count, c.dtype, c.op, comm, options);
            CHECK(send == ref.input);
          }
          CHECK(ref.mismatch(recv) == "");
        }
      }
    }
  }
}
