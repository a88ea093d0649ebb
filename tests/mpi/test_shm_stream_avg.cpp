// Which shared-memory results are copied out with streaming stores: from the
// tuning table's shm_stream_bytes on, except for Avg, whose scale pass reads the
// output again at once (docs/ALGORITHMS.md, docs/ENVIRONMENT.md). Avg once
// streamed like Sum, and its scale pass then read the whole output back from
// DRAM. The library counts the messages it streamed (path_counts.hpp).
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "collectives/shared/path_counts.hpp"
#include "collectives/tuning_table.hpp"
#include "mpi/test_support.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

using namespace concord;
using concord::detail::shm_path_count;
using concord::detail::ShmPath;

std::uint64_t shm_messages() {
  return shm_path_count(ShmPath::CopyRounds) + shm_path_count(ShmPath::SingleCopy);
}

}  // namespace

TEST_CASE("Avg results are never streamed out of shared memory, Sum results from the threshold",
          "[shm_stream]") {
  Communicator comm = Communicator::world();
  // At least past the direct path, and no more than 16 MiB (a variable may set
  // the threshold out of reach: then only Avg is checked, at 1 MiB).
  const std::size_t threshold = detail::size_thresholds().shm_stream_bytes;
  const bool sum_streams = threshold <= (std::size_t{16} << 20);
  const std::size_t bytes = sum_streams ? std::max<std::size_t>(threshold, 1 << 20) : 1 << 20;
  const std::size_t count = bytes / sizeof(float);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
    if (op == ReduceOp::Sum && !sum_streams) continue;
    INFO("ranks=" << comm.size() << " op=" << to_string(op) << " bytes=" << bytes
                  << " shm_stream_bytes=" << threshold);
    const test::ReferenceCase ref(comm.rank(), comm.size(), count, DataType::Float32, op);
    std::vector<std::byte> recv(ref.expected.size(), std::byte{0x5a});
    const std::uint64_t messages = shm_messages();
    const std::uint64_t streamed = shm_path_count(ShmPath::StreamedOutput);
    allreduce(ref.input.data(), recv.data(), count, DataType::Float32, op, comm);
    CHECK(ref.mismatch(recv) == "");
    // Only messages of allreduce_shared (one node's ranks) count; elsewhere
    // (one rank, Hierarchical across nodes, flat) nothing does.
    const bool took_shm = shm_messages() > messages;
    const std::uint64_t added = shm_path_count(ShmPath::StreamedOutput) - streamed;
    CHECK(added == (took_shm && op != ReduceOp::Avg ? 1u : 0u));
  }
}
