// Turning MPI return codes into concord::Error.
#pragma once

#include <concord/error.hpp>

#include <mpi.h>

#include <string>

namespace concord::detail {

// Throws Error(MpiError) with MPI's own error string when rc != MPI_SUCCESS.
// Needs MPI_ERRORS_RETURN on the communicator, which concord sets on its duplicates.
void check_mpi(int rc, const char* call, int rank = -1);

// This process's rank in MPI_COMM_WORLD, or -1 when MPI is not running; for messages.
int world_rank_or_unknown() noexcept;

// Throws Error(Finalized) when MPI_Finalize has been called, naming `what`.
void ensure_not_finalized(const char* what);

}  // namespace concord::detail
