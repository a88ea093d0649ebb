// concord Communicators cached per MPI communicator, as an MPI attribute of it:
// freed by the attribute's delete callback when the application frees the
// communicator, and by release_all() at MPI_Finalize.
#pragma once

#include <concord/communicator.hpp>

#include <mpi.h>

namespace concord::mpi_interposer {

// Where a call on a communicator goes: concord's Communicator for it, or MPI.
struct CommRoute {
  const Communicator* communicator = nullptr;  // nullptr: PMPI_Allreduce
  bool invalid = false;  // MPI refused the handle (freed, never made): MPI reports it
};

// The route of `comm`: its Communicator (made on first use: collective over comm,
// like the MPI_Allreduce that asks), or MPI for an intercommunicator and for a
// handle MPI does not take as a communicator. Throws concord::Error when set-up
// fails.
CommRoute communicator_for(MPI_Comm comm);

// Frees every cached Communicator; called before PMPI_Finalize.
void release_all() noexcept;

}  // namespace concord::mpi_interposer
