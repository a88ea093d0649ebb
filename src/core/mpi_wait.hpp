// Waiting on MPI requests with a deadline (CONCORD_TRANSPORT_TIMEOUT_S): the
// polling loop and the timeout's wording, shared by the MPI transport and the
// engine's negotiation, so a dead peer or link reads the same wherever it shows.
#pragma once

#include <concord/error.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include <sched.h>

namespace concord::detail {

// What a poll ended with: MPI's return code, or that the deadline passed first.
struct PollResult {
  int rc = MPI_SUCCESS;
  bool timed_out = false;
};

// How a wait spends the time between polls. Busy: the transport's waits, in the
// middle of a collective, where a message is due any microsecond; spin, then
// yield. Idle: the engine's negotiation, which waits for the slowest rank's
// next cycle; spinning that long would take the core from the framework's own
// threads, so it sleeps 50 us between polls after a short spin.
enum class Patience { Busy, Idle };

// Polls `test` (which drives MPI progress) until it reports completion or
// `timeout_s` (0: never) passes. MPICH's own MPI_Wait spins without yielding,
// which makes runs with more ranks than cores crawl (each message then waits for
// a scheduler time slice). The clock is read only every so many polls, so the
// deadline costs nothing on the fast path.
template <typename Test>
PollResult poll_until_done(Test&& test, double timeout_s, Patience patience = Patience::Busy) {
  const bool idle = patience == Patience::Idle;
  // 64-bit: a wait of the default 30 minutes makes billions of polls.
  const std::uint64_t spins_before_yield = idle ? 100 : 2000;
  const std::uint64_t spins_before_sleep = 1000;  // idle waits only
  const std::uint64_t polls_per_clock_read = idle ? 64 : 4096;
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t spins = 0;; ++spins) {
    int done = 0;
    if (int rc = test(&done); rc != MPI_SUCCESS) return {rc, false};
    if (done) return {};
    if (idle && spins >= spins_before_sleep) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else if (spins >= spins_before_yield) {
      sched_yield();
    }
    if (timeout_s > 0 && spins % polls_per_clock_read == polls_per_clock_read - 1 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            timeout_s) {
      return {MPI_SUCCESS, true};
    }
  }
}

// The error a wait past its deadline fails with: "no message completed for T s
// while waiting on <waiting_on>: the peer may have died or its network link gone
// down; <consequence> (CONCORD_TRANSPORT_TIMEOUT_S sets the limit, ...)".
Error timeout_error(int rank, double timeout_s, const std::string& waiting_on,
                    const std::string& consequence);

// "rank 3", or "rank 1 (world rank 3)" where `peer`'s rank in `comm` is not its
// MPI_COMM_WORLD rank (algorithms run on sub-communicators).
std::string describe_peer(MPI_Comm comm, int peer);

}  // namespace concord::detail
