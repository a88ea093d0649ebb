// Calls that fail instead of hanging (AllreduceOptions::agreement_timeout_s):
// the exchange of a call's signature with a deadline before any data moves, and
// what a communicator that has failed does from then on.
#pragma once

#include "core/validate.hpp"

#include <concord/communicator.hpp>
#include <concord/error.hpp>

#include <string_view>

namespace concord::detail {

// Collective over `comm`: this rank's signature to every other rank and theirs
// to it, waiting at most `timeout_s`. Then, as check_agreement, Error(Mismatch)
// on every rank where the signatures differ or a rank rejected its arguments
// (nothing moved; the communicator stays usable). Where some ranks' signatures
// have not come by the deadline: Error(Timeout) naming them, and the
// communicator fails (fail_communicator). Point-to-point in the order of the
// calls on `comm`, so every rank judges the same rows: those of every rank's
// n-th checked call.
void agree_within(const char* what, std::string_view label, const CallSignature& mine,
                  bool locally_valid, const Communicator& comm, double timeout_s);

// Records `error` as the reason `comm` failed, for check_not_failed, and
// poisons its shared-memory arena, so a peer waiting on this rank there fails
// instead of waiting for ever. The first reason stays.
void fail_communicator(const Communicator& comm, const Error& error);

// Whether `error`, escaping a call once its ranks agreed to make it, leaves them
// out of step for good: everything but an argument's rejection (InvalidArgument,
// Mismatch, Finalized), which comes before any data moves. A wait past its
// deadline, an abort, and a failure of MPI, CUDA or the system partway (one rank
// stops while its peers go on) all do: a peer then waits on this rank's shared
// counters, which have no deadline of their own, or meets what it left behind.
bool leaves_ranks_out_of_step(const Error& error);

// Runs `data_phase`; an error escaping it that leaves the ranks out of step
// (leaves_ranks_out_of_step), or any error once `comm` was aborted, fails `comm`.
template <typename DataPhase>
void failing_when_abandoned(const Communicator& comm, DataPhase&& data_phase) {
  try {
    data_phase();
  } catch (const Error& e) {
    if (leaves_ranks_out_of_step(e) || comm.aborted()) fail_communicator(comm, e);
    throw;
  }
}

// Throws the error `comm` failed with, if it has, or (failing it) that it was
// aborted; nothing otherwise.
void check_not_failed(const Communicator& comm);

}  // namespace concord::detail
