// What the interposer did: counters, the verbose lines (rank 0 of MPI_COMM_WORLD),
// and concord errors turned into MPI error codes through the communicator's handler.
#pragma once

#include "rules.hpp"

#include <mpi.h>

namespace concord::mpi_interposer {

void count_taken() noexcept;
void count_passed(PassReason reason) noexcept;

// Verbose: the rules, once, at the first MPI_Allreduce; a bad setting is said
// once whether verbose or not.
void announce_once() noexcept;
// Verbose: "taken N, passed M (reason: n, ...)", at MPI_Finalize.
void summarize() noexcept;

// Reports `message` through comm's error handler as a new error code of
// `error_class` (its MPI_Error_string is the message) and returns that code.
int raise_error(MPI_Comm comm, int error_class, const char* message) noexcept;

}  // namespace concord::mpi_interposer
