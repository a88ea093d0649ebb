// The measured choice between single-copy and copied rounds for large messages
// (collectives/shared_path_choice.hpp), on the ranks of one node. Every message
// of one size class past the single-copy threshold must be right (against a
// reference computed here); the library's path counters show which path each
// took: the first kSamplesPerPath take single copy, the next as many copied
// rounds, the next single copy; every later one takes the same path on every
// rank, and the same until the measurement starts again after kMeasurePeriod
// messages.
// Run by mpi_np{2,3}_shm_path_choice (hidden tag: one node, a thousand messages).
#include <catch2/catch.hpp>
#include <concord/concord.hpp>

#include "collectives/shared_path_choice.hpp"
#include "collectives/shared_path_counts.hpp"
#include "mpi/cma_probe.hpp"

#include <cstdint>
#include <vector>

namespace {

using concord::detail::kMeasurePeriod;
using concord::detail::kSamplesPerPath;
using concord::detail::shm_path_count;
using concord::detail::ShmPath;

// Message m: element i of rank r is (r + 1) * ((i + m) % 7 + 1), small integers,
// so the float sums are exact: ((i + m) % 7 + 1) * p * (p + 1) / 2.
bool allreduce_matches(concord::Communicator& comm, std::size_t count, std::size_t m) {
  const int p = comm.size();
  std::vector<float> send(count);
  for (std::size_t i = 0; i < count; ++i) {
    send[i] = static_cast<float>((comm.rank() + 1) * static_cast<int>((i + m) % 7 + 1));
  }
  std::vector<float> recv(count, -1.0f);
  concord::allreduce(send.data(), recv.data(), count, concord::DataType::Float32,
                     concord::ReduceOp::Sum, comm);
  for (std::size_t i = 0; i < count; ++i) {
    if (recv[i] != static_cast<float>(static_cast<int>((i + m) % 7 + 1) * p * (p + 1) / 2)) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("large messages take the path measured faster, the same on every rank",
          "[.][path_choice]") {
  if (!concord::test::host_allows_cross_memory_attach(MPI_COMM_WORLD)) {
    WARN("this host refuses cross-memory attach between processes: no choice to make");
    return;
  }
  // A communicator of its own: its arena's size classes start from zero.
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  std::vector<std::uint8_t> single_copy;  // per message: whether it took single copy
  {
    concord::Communicator comm(dup);
    constexpr std::size_t kCount = (std::size_t{256} << 10) / sizeof(float) + 5;  // one class
    const std::size_t messages = kMeasurePeriod + 2 * kSamplesPerPath + 2;
    bool all_right = true;
    for (std::size_t m = 0; m < messages; ++m) {
      const std::uint64_t before = shm_path_count(ShmPath::SingleCopy);
      all_right = allreduce_matches(comm, kCount, m) && all_right;
      single_copy.push_back(shm_path_count(ShmPath::SingleCopy) != before ? 1 : 0);
    }
    CHECK(all_right);
  }
  MPI_Comm_free(&dup);

  constexpr std::size_t kExplore = 2 * kSamplesPerPath;
  for (std::size_t start : {std::size_t{0}, std::size_t{kMeasurePeriod}}) {
    for (std::size_t k = 0; k < kExplore; ++k) {
      INFO("message " << start + k << " of a measurement");
      CHECK(single_copy[start + k] == (k < kSamplesPerPath ? 1 : 0));
    }
    CHECK(single_copy[start + kExplore] == 1);
  }
  // One choice from the measurement to the next.
  for (std::size_t m = kExplore + 2; m < kMeasurePeriod; ++m) {
    INFO("message " << m);
    REQUIRE(single_copy[m] == single_copy[kExplore + 1]);
  }
  // The same paths on every rank, message by message.
  int ranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<std::uint8_t> everyone(single_copy.size() * static_cast<std::size_t>(ranks));
  MPI_Allgather(single_copy.data(), static_cast<int>(single_copy.size()), MPI_UINT8_T,
                everyone.data(), static_cast<int>(single_copy.size()), MPI_UINT8_T, MPI_COMM_WORLD);
  for (int r = 1; r < ranks; ++r) {
    INFO("rank " << r << " against rank 0");
    CHECK(std::equal(single_copy.begin(), single_copy.end(),
                     everyone.begin() + static_cast<std::ptrdiff_t>(r * single_copy.size())));
  }
}
