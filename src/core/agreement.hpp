// Set-up that has to succeed on every rank of a communicator or on none: one
// place for "agree across ranks, or everyone falls back".
#pragma once

#include <mpi.h>

#include <string>
#include <string_view>

namespace concord::detail {

// Collective over `comm`: whether `ok` holds on every rank (one MPI_Allreduce of
// a flag). `rank` labels errors. Throws Error(MpiError) when MPI fails.
bool all_ranks_ok(MPI_Comm comm, bool ok, int rank);

// What falls back, and to what, for the warning agree_or_fall_back prints.
struct FallBack {
  std::string_view what;     // "the shared-memory transport"
  std::string_view instead;  // "using the MPI transport instead"
};

// Collective over `comm`: all_ranks_ok(comm, local_failure.empty(), rank). When
// some rank failed, every rank falls back (returns false) and the warning is
// written once per cause: a rank that failed prints "<local_failure>; <instead>",
// and rank 0 of `comm`, when its own set-up worked, says another rank failed.
bool agree_or_fall_back(MPI_Comm comm, const std::string& local_failure, int rank,
                        const FallBack& fall_back);

}  // namespace concord::detail
