// concord Communicators cached per MPI communicator, as an MPI attribute of it:
// freed by the attribute's delete callback when the application frees the
// communicator, and by release_all() at MPI_Finalize.
#pragma once

#include <concord/communicator.hpp>

#include <mpi.h>

namespace concord::mpi_interposer {

// The Communicator of `comm` (made on first use: collective over comm, like the
// MPI_Allreduce that asks), or nullptr for an intercommunicator. Throws
// concord::Error when set-up fails.
const Communicator* communicator_for(MPI_Comm comm);

// Frees every cached Communicator; called before PMPI_Finalize.
void release_all() noexcept;

}  // namespace concord::mpi_interposer
