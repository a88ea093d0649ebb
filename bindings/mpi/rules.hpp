// What the interposer takes and what it passes on to MPI: the one place that decides.
#pragma once

#include <concord/types.hpp>

#include <mpi.h>

#include <cstddef>
#include <optional>

namespace concord::mpi_interposer {

// Why a call went to PMPI_Allreduce; counted and printed by the verbose report.
enum class PassReason {
  Disabled,         // CONCORD_MPI_INTERPOSE=0 or a bad setting
  ConcordInternal,  // concord's own set-up call, made while the interposer runs concord
  EmptyOrInvalid,   // count <= 0, null buffers (MPI_BOTTOM), MPI_IN_PLACE as recvbuf,
                    // MPI_COMM_NULL: MPI's to handle
  Datatype,         // a user-defined, derived or unsupported predefined datatype
  Op,               // a user op, logical/bitwise ops, MINLOC/MAXLOC, REPLACE, NO_OP
  Intercommunicator,
  BelowThreshold,  // fewer bytes than CONCORD_MPI_INTERPOSE_MIN_BYTES
  Count            // number of reasons
};
const char* to_string(PassReason reason) noexcept;

// A call concord runs: element type, operator, and the byte size.
struct Taken {
  DataType dtype;
  ReduceOp op;
  std::size_t bytes;
};

// The predefined MPI datatypes and ops concord implements (nullopt: anything else).
std::optional<DataType> concord_type(MPI_Datatype datatype) noexcept;
std::optional<ReduceOp> concord_op(MPI_Op op) noexcept;

// The local part of the decision (everything but the communicator's kind), the
// same on every rank for a correct MPI program: it reads only what MPI requires
// all ranks to pass alike (count, datatype, op) and the settings.
struct Decision {
  std::optional<Taken> taken;
  PassReason reason = PassReason::Disabled;  // when not taken
};
Decision decide(const void* sendbuf, const void* recvbuf, long long count, MPI_Datatype datatype,
                MPI_Op op, MPI_Comm comm) noexcept;

// One line for the verbose report: which datatypes, ops and sizes are taken.
const char* rules_summary() noexcept;

}  // namespace concord::mpi_interposer
