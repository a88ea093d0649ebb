// Set-up that has to succeed on every rank of a communicator or on none: one
// place for "agree across ranks, or everyone falls back", and for how the
// set-up's collectives wait for the other ranks.
#pragma once

#include "core/abort_signal.hpp"

#include <mpi.h>

#include <string>
#include <string_view>

namespace concord::detail {

// How a set-up collective waits (the first call that needs shared memory or a
// device path meets the other ranks in them, and a rank that never comes would
// otherwise hold its peers in MPI for ever): like the transport, at most
// CONCORD_TRANSPORT_TIMEOUT_S (0: for ever), and no longer once `abort` (the
// communicator's; null: none) is raised. `step` names the set-up in the error.
struct SetupWait {
  std::string_view step = "a set-up step";  // "the shared-memory transport's set-up"
  const AbortSignal* abort = nullptr;
};

// Waits for a set-up collective's `request` (MPI's `call`) as `wait` says; past
// the deadline Error(Timeout), on an abort Error(Shutdown), both naming the
// step, with the request abandoned (MPI may still write what it was given: it
// must be on the heap, see keep_until_exit). `rank` labels errors.
void wait_for_setup(MPI_Request& request, const char* call, int rank, const SetupWait& wait);

// Collective over `comm`: whether `ok` holds on every rank (one MPI_Iallreduce of
// a flag, waited for as `wait` says). `rank` labels errors. Throws
// Error(MpiError) when MPI fails, and as wait_for_setup.
bool all_ranks_ok(MPI_Comm comm, bool ok, int rank, const SetupWait& wait = {});

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
