// Waiting on MPI requests with a deadline (CONCORD_TRANSPORT_TIMEOUT_S): the
// polling loop and the timeout's wording, shared by the MPI transport, the
// set-up collectives and the engine's negotiation, so a dead peer or link reads
// the same wherever it shows.
#pragma once

#include "core/abort_signal.hpp"

#include <concord/error.hpp>

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <sched.h>

namespace concord::detail {

// What a poll ended with: MPI's return code, or that the deadline passed, or
// the communicator was aborted, first.
struct PollResult {
  int rc = MPI_SUCCESS;
  bool timed_out = false;
  bool aborted = false;
};

// How a wait spends the time between polls. Busy: the transport's waits, in the
// middle of a collective, where a message is due any microsecond; spin, then
// yield. Idle: the engine's negotiation, which waits for the slowest rank's
// next cycle; spinning that long would take the core from the framework's own
// threads, so it sleeps 50 us between polls after a short spin.
enum class Patience { Busy, Idle };

// Polls `test` (which drives MPI progress) until it reports completion, or
// `timeout_s` (0: never) passes, or `abort` (null: none) is raised. MPICH's own MPI_Wait spins
// without yielding, which makes runs with more ranks than cores crawl (each message then waits for
// a scheduler time slice). The clock and the flag are read only every so many
// polls, so they cost nothing on the fast path.
template <typename Test>
PollResult poll_until_done(Test&& test, double timeout_s, Patience patience = Patience::Busy,
                           const AbortSignal* abort = nullptr) {
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
    if (spins % polls_per_clock_read != polls_per_clock_read - 1) continue;
    if (abort != nullptr && abort->raised()) return {MPI_SUCCESS, false, true};
    if (timeout_s > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            timeout_s) {
      return {MPI_SUCCESS, true, false};
    }
  }
}

// The error a wait past its deadline fails with: "no message completed for T s
// while waiting on <waiting_on>: the peer may have died or its network link gone
// down; <consequence> (CONCORD_TRANSPORT_TIMEOUT_S sets the limit, ...)".
Error timeout_error(int rank, double timeout_s, const std::string& waiting_on,
                    const std::string& consequence);

// The error of a call on a communicator this rank aborted (Communicator::abort),
// ErrorCode::Shutdown; `when`: "while waiting on rank 1", "before this call".
Error aborted_error(int rank, const std::string& when);

// "rank 3", or "rank 1 (world rank 3)" where `peer`'s rank in `comm` is not its
// MPI_COMM_WORLD rank (algorithms run on sub-communicators).
std::string describe_peer(MPI_Comm comm, int peer);

// A receive this rank gives up on (its deadline passed, or an abort): cancelled,
// and waited for until MPI says it is cancelled or complete, so that a late
// message is not written into a buffer its owner frees or reuses next (a freed
// receive stays posted: MPI_Request_free does not cancel). A receive that has
// already matched a large message still under way cannot be cancelled; if its
// data has not come within kCancelledReceiveWaitS the request is freed after
// all, since its peer is then presumed gone. `recv` is MPI_REQUEST_NULL after.
inline constexpr double kCancelledReceiveWaitS = 2.0;
void cancel_receive(MPI_Request& recv);

// Keeps `buffer` until the process exits (never destroyed: concord's
// MPI_Finalize at exit may still drive the request into it).
void keep_buffer_until_exit(std::shared_ptr<void> buffer);

// For a nonblocking collective abandoned at its deadline or an abort: MPI still
// owns the request and may yet write its buffers (the peer may come back, or the
// link), and such a request can be neither freed nor cancelled. So the buffers
// move, their heap storage with them (a vector's elements, a unique_ptr's
// object: what MPI was given must be on the heap), to a list kept until exit.
template <typename... Buffers>
void keep_until_exit(Buffers&... buffers) {
  (keep_buffer_until_exit(std::make_shared<Buffers>(std::move(buffers))), ...);
}

}  // namespace concord::detail
