// Set-up that has to succeed on every rank of a communicator or on none: one
// place for "agree across ranks, or everyone falls back", and for how the
// set-up's collectives wait for the other ranks.
#pragma once

#include "core/abort_signal.hpp"
#include "core/mpi_wait.hpp"

#include <concord/error.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace concord::detail {

// How a set-up collective waits (the first call that needs shared memory or a
// device path meets the other ranks in them, and a rank that never comes would
// otherwise hold its peers in MPI for ever): like the transport, at most
// CONCORD_TRANSPORT_TIMEOUT_S (0: for ever), and no longer once `abort` (the
// communicator's; null: none) is raised. `step` names the set-up in the error.
struct SetupWait {
  std::string_view step = "a set-up step";  // "the shared-memory transport's set-up"
  const AbortSignal* abort = nullptr;
  // What the deadline's error says follows from it.
  std::string_view consequence = "the call fails, and so does every later one on this communicator";
};

// Waits for a set-up collective's `request` (MPI's `call`) as `wait` says; past
// the deadline Error(Timeout), on an abort Error(Shutdown), both naming the
// step, with the request abandoned (MPI may still write what it was given: it
// must be on the heap, see keep_until_exit). `rank` labels errors.
void wait_for_setup(MPI_Request& request, const char* call, int rank, const SetupWait& wait);

// The same, for a request that MPI was given `buffers` for: where it is
// abandoned, they are kept until exit (keep_until_exit) before the error goes on.
template <typename... Buffers>
void wait_for_setup(MPI_Request& request, const char* call, int rank, const SetupWait& wait,
                    Buffers&... buffers) {
  try {
    wait_for_setup(request, call, rank, wait);
  } catch (...) {
    keep_until_exit(buffers...);
    throw;
  }
}

// Whether a set-up's `error` ends the call instead of making it fall back: a
// rank that never came (Timeout) or this rank's abort (Shutdown). A fall-back
// would let this rank go on while its peers wait for it in the set-up.
inline bool ends_the_setup(const Error& error) {
  return error.code() == ErrorCode::Timeout || error.code() == ErrorCode::Shutdown;
}

// Collective over `comm`: the least of every rank's `value` (one MPI_Iallreduce,
// waited for as `wait` says). `rank` labels errors. Throws Error(MpiError) when
// MPI fails, and as wait_for_setup.
int least_over_ranks(MPI_Comm comm, int value, int rank, const SetupWait& wait = {});

// Collective over `comm`: whether `ok` holds on every rank (least_over_ranks of a flag).
bool all_ranks_ok(MPI_Comm comm, bool ok, int rank, const SetupWait& wait = {});

// Collective over `comm`: every rank's `bytes` bytes from `mine`, in rank order
// (one MPI_Iallgather, waited for as `wait` says; `bytes` the same on every
// rank). Throws as least_over_ranks.
std::vector<std::byte> gather_over_ranks(MPI_Comm comm, const void* mine, std::size_t bytes,
                                         int rank, const SetupWait& wait = {});

// gather_over_ranks of a trivially copyable `T`: every rank's, in rank order.
template <typename T>
std::vector<T> gather_over_ranks(MPI_Comm comm, const T& mine, int rank,
                                 const SetupWait& wait = {}) {
  static_assert(std::is_trivially_copyable_v<T>);
  const std::vector<std::byte> all = gather_over_ranks(comm, &mine, sizeof(T), rank, wait);
  std::vector<T> out(all.size() / sizeof(T));
  std::memcpy(out.data(), all.data(), out.size() * sizeof(T));
  return out;
}

// Collective over `comm`: rank 0's `value` on every rank (one MPI_Ibcast, waited
// for as `wait` says; the other ranks' `value` is not read). Throws as
// least_over_ranks.
std::vector<std::byte> broadcast_over_ranks(MPI_Comm comm, const void* value, std::size_t bytes,
                                            int rank, const SetupWait& wait = {});
template <typename T>
T broadcast_over_ranks(MPI_Comm comm, const T& value, int rank, const SetupWait& wait = {}) {
  static_assert(std::is_trivially_copyable_v<T>);
  const std::vector<std::byte> got = broadcast_over_ranks(comm, &value, sizeof(T), rank, wait);
  T out;
  std::memcpy(&out, got.data(), sizeof(T));
  return out;
}

// What falls back, and to what, for the warning agree_or_fall_back prints.
struct FallBack {
  std::string_view what;     // "the shared-memory transport"
  std::string_view instead;  // "using the MPI transport instead"
};

// Collective over `comm`: all_ranks_ok(comm, local_failure.empty(), rank, wait).
// When some rank failed, every rank falls back (returns false) and the warning
// is written once per cause: a rank that failed prints "<local_failure>;
// <instead>", and rank 0 of `comm`, when its own set-up worked, says another
// rank failed.
bool agree_or_fall_back(MPI_Comm comm, const std::string& local_failure, int rank,
                        const FallBack& fall_back, const SetupWait& wait = {});

}  // namespace concord::detail
