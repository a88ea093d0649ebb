// The engine when one rank alone fails inside a cycle: its ranks must not go out
// of step, where a later collective would meet messages of another one.
//   - A fusion buffer the last rank cannot allocate: the ranks agree on it, and
//     every rank's engine stops with an error that says so, at once (before, that
//     rank skipped the bucket's allreduce and its peers waited in it).
//   - An allgather whose result the last rank cannot allocate, after the sizes'
//     exchange: that rank skipped the data's exchange, so the engine's
//     communicator fails, and its next collective fails with the allocation's
//     error instead of running against its peers'.
// The failure is an address-space limit (RLIMIT_AS) on the last rank. Hidden: it
// needs CONCORD_TRANSPORT_TIMEOUT_S short (the peers of the skipped exchange wait
// for it), and it does not run under a sanitizer, whose allocator reports an
// allocation over the limit instead of failing it.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "mpi/engine_support.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

using namespace concord;
using concord::test::failure_of;
using concord::test::failure_of_submission;
using concord::test::seconds_since;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Limits this process's address space to what it maps now plus `headroom` bytes,
// for the object's lifetime.
class AddressSpaceLimit {
 public:
  explicit AddressSpaceLimit(std::size_t headroom) {
    getrlimit(RLIMIT_AS, &saved_);
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    REQUIRE(pages > 0);
    rlimit limit = saved_;
    limit.rlim_cur = pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) + headroom;
    REQUIRE(setrlimit(RLIMIT_AS, &limit) == 0);
  }
  ~AddressSpaceLimit() { setrlimit(RLIMIT_AS, &saved_); }
  AddressSpaceLimit(const AddressSpaceLimit&) = delete;
  AddressSpaceLimit& operator=(const AddressSpaceLimit&) = delete;

 private:
  rlimit saved_{};
};

// Whether a case can run: on two ranks or more, without a sanitizer.
bool runs_here(const Communicator& comm) {
  if (kSanitized) {
    WARN("skipped under a sanitizer (its allocator does not fail at RLIMIT_AS)");
    return false;
  }
  return comm.size() >= 2;
}

EngineOptions packed_options() {
  EngineOptions options;
  options.cycle_time_ms = 0.5;
  options.algorithm = Algorithm::Ring;  // packed buckets, through the fusion buffer
  options.fusion_threshold = 256 * kMiB;
  options.fusion_in_place_bytes = 0;  // every tensor packed, however large
  return options;
}

}  // namespace

TEST_CASE("a fusion buffer one rank cannot allocate stops the engine on every rank at once",
          "[.][engine_failure][fusion_buffer]") {
  Communicator comm = Communicator::world();
  if (!runs_here(comm)) return;
  const bool limited = comm.rank() == comm.size() - 1;
  Engine engine(comm, packed_options());
  // A small fused bucket first, so the engine's threads and buffers exist.
  std::vector<float> a(16, 1.0f), b(16, 1.0f);
  for (Handle& h : engine.enqueue_grouped_allreduce(
           {"warm_a", "warm_b"},
           {{a.data(), a.size(), DataType::Float32}, {b.data(), b.size(), DataType::Float32}},
           ReduceOp::Sum)) {
    h.wait();
  }
  CHECK(a[0] == static_cast<float>(comm.size()));
  // Two 48 MiB tensors: one bucket, a 96 MiB fusion buffer, beyond what the limit
  // leaves. (Above 64 MiB: a smaller one may come from memory that glibc's
  // allocator has reserved for a thread's arena already, within the limit.)
  std::vector<float> big1(12 * kMiB, 1.0f), big2(12 * kMiB, 1.0f);
  std::vector<std::string> failures;
  const auto start = std::chrono::steady_clock::now();
  {
    std::optional<AddressSpaceLimit> limit;
    if (limited) limit.emplace(8 * kMiB);
    std::vector<Handle> handles =
        engine.enqueue_grouped_allreduce({"big1", "big2"},
                                         {{big1.data(), big1.size(), DataType::Float32},
                                          {big2.data(), big2.size(), DataType::Float32}},
                                         ReduceOp::Sum);
    for (Handle& h : handles) failures.push_back(failure_of(h));
  }
  const double waited = seconds_since(start);
  INFO("rank " << comm.rank() << ", " << waited << " s");
  for (const std::string& failure : failures) {
    INFO(failure);
    if (limited) {
      CHECK_THAT(failure, Catch::Matchers::Contains("fusion buffer of 100663296 bytes") &&
                              Catch::Matchers::Contains("cannot allocate memory"));
    } else {
      CHECK_THAT(failure,
                 Catch::Matchers::Contains("another rank could not allocate a fusion buffer"));
    }
  }
  CHECK(waited < 4);  // the peers' transport deadline is 5 s: they did not wait for it
  // The engine stopped for good, and says why: a later submission fails, at once
  // or (if the engine thread has not yet stopped) through its handle.
  std::vector<float> later(16, 1.0f);
  const std::string later_failure = failure_of_submission([&] {
    return engine.enqueue_allreduce("later", {later.data(), later.size(), DataType::Float32},
                                    ReduceOp::Sum);
  });
  CHECK_THAT(later_failure, Catch::Matchers::Contains("fusion buffer"));
}

TEST_CASE("a rank that skipped an allgather's exchange fails its engine's later collectives",
          "[.][engine_failure][out_of_step]") {
  Communicator comm = Communicator::world();
  if (!runs_here(comm)) return;
  const bool limited = comm.rank() == comm.size() - 1;
  // Cycles of 0.5 s: a negotiation allows a peer one cycle beyond the transport's
  // deadline, and the peers come to the next one only once their allgather's
  // exchange has waited out that deadline for the limited rank.
  EngineOptions options = packed_options();
  options.cycle_time_ms = 500;
  Engine engine(comm, options);
  std::vector<float> warm(16, 1.0f);
  engine.enqueue_allreduce("warm", {warm.data(), warm.size(), DataType::Float32}, ReduceOp::Sum)
      .wait();
  // 48 MiB of rows from every rank: the gathered result (above 64 MiB, as above)
  // does not fit the limit.
  std::vector<float> rows(12 * kMiB, static_cast<float>(comm.rank()));
  std::string gathered_failure;
  std::string next_failure;
  {
    std::optional<AddressSpaceLimit> limit;
    if (limited) limit.emplace(8 * kMiB);
    Handle gathered =
        engine.enqueue_allgather("rows", {rows.data(), rows.size(), DataType::Float32}, 1024);
    gathered_failure = failure_of(gathered);
    // The next collective, which the ranks negotiate as usual: on the limited rank
    // it must not run against the peers' unfinished allgather.
    std::vector<float> next(16, 1.0f);
    Handle after = engine.enqueue_allreduce("next", {next.data(), next.size(), DataType::Float32},
                                            ReduceOp::Sum);
    next_failure = failure_of(after);
  }
  INFO("rank " << comm.rank() << ": allgather: " << gathered_failure
               << "; next allreduce: " << next_failure);
  if (limited) {
    CHECK_THAT(gathered_failure, Catch::Matchers::Contains("cannot allocate memory"));
    // The communicator's first reason: the allocation, not a timeout of its own.
    CHECK_THAT(next_failure, Catch::Matchers::Contains("cannot allocate memory"));
  } else {
    CHECK_THAT(gathered_failure, Catch::Matchers::Contains("no message completed for 5 s"));
    CHECK_THAT(next_failure, Catch::Matchers::Contains("no message completed for 5 s"));
  }
}
