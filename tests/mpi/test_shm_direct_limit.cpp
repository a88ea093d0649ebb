// Which shared-memory path a small host message takes on one node: up to the
// direct limit the one-synchronisation path, above it copied rounds. The limit
// depends on the node's rank count (collectives/tuning_table.hpp): 8 KiB at
// two ranks, where the direct path reads no more of the peer's memory than the
// rounds do, 1 KiB at more; CONCORD_SHM_DIRECT_BYTES, when set, is the limit at
// every rank count (mpi_np{2,3}_shm_direct_env). The library counts the
// messages that took rounds (not the direct ones: that path is the
// latency-critical one), so a message on one node's shared memory below the
// single-copy size that added no count took the direct path. Every result is
// checked against the serial reference. Skips where a tuning file or another
// size variable could move the limits.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "collectives/shared/node_arena.hpp"
#include "collectives/shared/path_counts.hpp"
#include "core/communicator_state.hpp"
#include "mpi/test_support.hpp"

#include <cstdlib>
#include <optional>
#include <vector>

namespace {

using namespace concord;
using namespace concord::test;
using concord::detail::shm_path_count;
using concord::detail::ShmPath;

bool limits_moved_by_environment() {
  for (const char* name :
       {"CONCORD_TUNING_FILE", "CONCORD_SHM_REGION_BYTES", "CONCORD_SHM_SINGLE_COPY_BYTES"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return true;
  }
  return false;
}

// The limit this configuration should have, written out here (not read from the
// library): the variable where set, else the built-in one for the rank count.
std::size_t expected_direct_limit(int node_ranks) {
  const char* v = std::getenv("CONCORD_SHM_DIRECT_BYTES");
  if (v == nullptr || *v == '\0') return node_ranks == 2 ? 8192 : 1024;
  const std::optional<std::size_t> limit = parse_size(v);
  if (!limit || *limit % 4 != 0) {
    FAIL("CONCORD_SHM_DIRECT_BYTES must be a multiple of 4 bytes here, not '" << v << "'");
  }
  return *limit;
}

// Runs one float32 sum of `bytes` and says whether it took copied rounds.
bool took_rounds(Communicator& comm, std::size_t bytes) {
  const std::size_t count = bytes / sizeof(float);
  const ReferenceCase ref(comm.rank(), comm.size(), count, DataType::Float32, ReduceOp::Sum);
  std::vector<std::byte> recv(ref.expected.size(), std::byte{0x5a});
  const std::uint64_t rounds = shm_path_count(ShmPath::CopyRounds);
  const std::uint64_t single = shm_path_count(ShmPath::SingleCopy);
  allreduce(ref.input.data(), recv.data(), count, DataType::Float32, ReduceOp::Sum, comm);
  INFO("ranks=" << comm.size() << " bytes=" << bytes);
  CHECK(ref.mismatch(recv) == "");
  CHECK(shm_path_count(ShmPath::SingleCopy) == single);  // far below its size
  const std::uint64_t added = shm_path_count(ShmPath::CopyRounds) - rounds;
  REQUIRE(added <= 1);
  return added == 1;
}

}  // namespace

TEST_CASE("small host messages take the direct path up to the node's limit for its rank count",
          "[direct_limit]") {
  Communicator comm = Communicator::world();
  const detail::CommunicatorState& state = comm.state();
  const detail::SharedArena* arena = detail::node_arena(state);  // made on first use
  if (comm.size() < 2 || state.topology.num_nodes != 1 || arena == nullptr ||
      !state.arena_everywhere || limits_moved_by_environment()) {
    SUCCEED("needs 2+ ranks on one node with shared memory, no tuning file or size variables");
    return;
  }
  const std::size_t limit = expected_direct_limit(comm.size());
  for (std::size_t bytes : {std::size_t{4}, limit / 2, limit}) {
    INFO("ranks=" << comm.size() << " bytes=" << bytes << ": the direct path expected");
    CHECK_FALSE(took_rounds(comm, bytes));
  }
  for (std::size_t bytes : {limit + 4, 2 * limit}) {
    INFO("ranks=" << comm.size() << " bytes=" << bytes << ": copied rounds expected");
    CHECK(took_rounds(comm, bytes));
  }
}
