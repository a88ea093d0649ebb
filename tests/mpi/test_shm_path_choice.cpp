// The measured choice between single-copy and copied rounds for large messages
// (collectives/shared/path_choice.hpp), on the ranks of one node. Every message
// must be right (against a reference computed here); the library's path
// counters show which path each message of one size class took: the first
// kSamplesPerPath single copy, the next as many copied rounds, the next single
// copy; every later one the same path on every rank, and the same until the
// measurement starts again after kMeasurePeriod messages. Messages of other
// sizes (the direct path, another class) run in between. Where some rank sets
// CONCORD_SHM_PATH_CHOICE=threshold (test mpi_np2_shm_path_choice_mixed, run by
// mixed_setting.cmake, launches one so), every message takes single copy on
// every rank.
// Run by mpi_np{2,3}_shm_path_choice and mpi_np2_shm_path_choice_mixed (hidden
// tag: one node, a thousand messages).
#include <catch2/catch.hpp>
#include <concord/concord.hpp>

#include "collectives/shared/path_choice.hpp"
#include "collectives/shared/path_counts.hpp"
#include "mpi/cma_probe.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

// Whether every rank of `comm` measures (CONCORD_SHM_PATH_CHOICE unset or measure).
bool every_rank_measures() {
  int measure = env_is("CONCORD_SHM_PATH_CHOICE", "threshold") ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &measure, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return measure == 1;
}

// Per message of the 256 KiB class: whether it took single copy.
std::vector<std::uint8_t> run_messages(std::size_t messages) {
  MPI_Comm dup = MPI_COMM_NULL;  // an arena of its own: its classes start from zero
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  std::vector<std::uint8_t> single_copy;
  {
    concord::Communicator comm(dup);
    constexpr std::size_t kCount = (std::size_t{256} << 10) / sizeof(float) + 5;
    constexpr std::size_t kOtherClass = (std::size_t{1} << 20) / sizeof(float) + 3;
    bool all_right = true;
    for (std::size_t m = 0; m < messages; ++m) {
      const std::uint64_t before = shm_path_count(ShmPath::SingleCopy);
      all_right = allreduce_matches(comm, kCount, m) && all_right;
      single_copy.push_back(shm_path_count(ShmPath::SingleCopy) != before ? 1 : 0);
      all_right = allreduce_matches(comm, 16, m) && all_right;  // the direct path
      if (m % 8 == 0) all_right = allreduce_matches(comm, kOtherClass, m) && all_right;
    }
    CHECK(all_right);
  }
  MPI_Comm_free(&dup);
  return single_copy;
}

}  // namespace

TEST_CASE("large messages take the path measured faster, the same on every rank",
          "[.][path_choice]") {
  if (!concord::test::host_allows_cross_memory_attach(MPI_COMM_WORLD)) {
    // (mixed_setting.cmake reports this line as a skip.)
    std::printf("skipped: this host refuses cross-memory attach\n");
    return;
  }
  // Skipped on every rank if set on any: a rank skipping alone would leave the
  // others in the collectives below.
  int settings_changed = env_is("CONCORD_SHM", "0") || env_is("CONCORD_SHM_CMA", "0") ||
                         std::getenv("CONCORD_SHM_SINGLE_COPY_BYTES") != nullptr;
  MPI_Allreduce(MPI_IN_PLACE, &settings_changed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (settings_changed != 0) {
    WARN("CONCORD_SHM, CONCORD_SHM_CMA or CONCORD_SHM_SINGLE_COPY_BYTES set: not checked");
    return;
  }
  const bool measured = every_rank_measures();
  constexpr std::size_t kExplore = 2 * kSamplesPerPath;
  const std::size_t second = kMeasurePeriod;  // the second measurement's first message
  const std::vector<std::uint8_t> single_copy = run_messages(second + kExplore + 64);

  if (!measured) {
    for (std::size_t m = 0; m < single_copy.size(); ++m) {
      INFO("message " << m << ", some rank set CONCORD_SHM_PATH_CHOICE=threshold");
      REQUIRE(single_copy[m] == 1);
    }
  } else {
    for (std::size_t start : {std::size_t{0}, second}) {
      for (std::size_t k = 0; k < kExplore; ++k) {
        INFO("message " << start + k << " of a measurement");
        CHECK(single_copy[start + k] == (k < kSamplesPerPath ? 1 : 0));
      }
      CHECK(single_copy[start + kExplore] == 1);
      // One choice from the end of this measurement to the next (or to the end).
      const std::size_t end = start == 0 ? second : single_copy.size();
      for (std::size_t m = start + kExplore + 2; m < end; ++m) {
        INFO("message " << m);
        REQUIRE(single_copy[m] == single_copy[start + kExplore + 1]);
      }
    }
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
