// The checked call's signature exchange, and a communicator's failure.
#include "dispatch/call_agreement.hpp"

#include "collectives/algorithms.hpp"
#include "core/communicator_state.hpp"
#include "core/mpi_check.hpp"
#include "core/mpi_wait.hpp"
#include "dispatch/dispatch.hpp"
#include "dispatch/paths.hpp"
#include "transport/shared_arena.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

namespace concord::detail {
namespace {

// The exchange's requests: a receive from every peer (recvs[p], null for this
// rank) and a send to every peer.
struct Exchange {
  std::vector<MPI_Request> recvs;
  std::vector<MPI_Request> sends;
};

// After the deadline: which peers' rows never came, their receives cancelled.
std::vector<std::string> abandon_receives(Exchange& ex, MPI_Comm comm, int rank) {
  std::vector<std::string> missing;
  for (std::size_t p = 0; p < ex.recvs.size(); ++p) {
    if (ex.recvs[p] == MPI_REQUEST_NULL) continue;
    int done = 0;
    check_mpi(MPI_Test(&ex.recvs[p], &done, MPI_STATUS_IGNORE), "MPI_Test", rank);
    if (done) continue;
    missing.push_back(describe_peer(comm, static_cast<int>(p)));
    cancel_receive(ex.recvs[p]);
  }
  return missing;
}

// Lets go of the sends still active: MPI completes them if their peer comes,
// reading `row`, which the communicator then keeps.
void free_sends(Exchange& ex, std::unique_ptr<SignatureRow> row, const CommunicatorState& state) {
  bool freed = false;
  for (MPI_Request& r : ex.sends) {
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Request_free(&r);
    freed = true;
  }
  if (freed) state.orphaned_rows.push_back(std::move(row));
}

// Sends that have not finished are let go: a peer that gave up cancelled its
// receive, so waiting for them could last for ever.
void release_sends(Exchange& ex, std::unique_ptr<SignatureRow> row, const CommunicatorState& state,
                   int rank) {
  int done = 0;
  check_mpi(
      MPI_Testall(static_cast<int>(ex.sends.size()), ex.sends.data(), &done, MPI_STATUSES_IGNORE),
      "MPI_Testall", rank);
  if (!done) free_sends(ex, std::move(row), state);
}

// How the wait for the peers' rows ended: complete, or with the peers whose
// rows did not come by the deadline, or aborted (Communicator::abort).
struct Arrival {
  std::vector<std::string> missing;
  bool aborted = false;
};

// Posts the exchange (receives first: a peer whose row has come has posted its
// receive of this one, so a send to it is matched) and waits for the rows until
// `timeout_s` or an abort; the receives still open then are cancelled.
Arrival exchange_rows(Exchange& ex, std::vector<SignatureRow>& rows, const SignatureRow& row,
                      MPI_Comm mpi, int rank, double timeout_s, const AbortSignal& abort) {
  const int size = static_cast<int>(rows.size());
  const int fields = static_cast<int>(row.size());
  ex.sends.reserve(static_cast<std::size_t>(size));
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    check_mpi(MPI_Irecv(rows[static_cast<std::size_t>(p)].data(), fields, MPI_INT64_T, p,
                        kTagCallAgreement, mpi, &ex.recvs[static_cast<std::size_t>(p)]),
              "MPI_Irecv", rank);
  }
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    ex.sends.emplace_back(MPI_REQUEST_NULL);
    check_mpi(
        MPI_Isend(row.data(), fields, MPI_INT64_T, p, kTagCallAgreement, mpi, &ex.sends.back()),
        "MPI_Isend", rank);
  }
  const PollResult polled = poll_until_done(
      [&](int* done) {
        return MPI_Testall(static_cast<int>(ex.recvs.size()), ex.recvs.data(), done,
                           MPI_STATUSES_IGNORE);
      },
      timeout_s, Patience::Busy, &abort);
  check_mpi(polled.rc, "MPI_Testall", rank);
  if (!polled.timed_out && !polled.aborted) return {};
  return {abandon_receives(ex, mpi, rank), polled.aborted};
}

}  // namespace

void agree_within(const char* what, std::string_view label, const CallSignature& mine,
                  bool locally_valid, const Communicator& comm, double timeout_s) {
  const CommunicatorState& state = comm.state();
  const int rank = comm.rank();
  const int size = comm.size();
  std::vector<SignatureRow> rows(static_cast<std::size_t>(size));
  rows[static_cast<std::size_t>(rank)] = signature_row(mine, locally_valid);
  if (size == 1) {
    judge_signatures(what, label, rows, locally_valid, rank);
    return;
  }
  auto row = std::make_unique<SignatureRow>(rows[static_cast<std::size_t>(rank)]);
  Exchange ex{std::vector<MPI_Request>(static_cast<std::size_t>(size), MPI_REQUEST_NULL), {}};
  Arrival arrival;
  try {
    arrival = exchange_rows(ex, rows, *row, comm.mpi_comm(), rank, timeout_s, state.abort_signal);
  } catch (...) {
    // An MPI call failed midway: nothing may still write into `rows` (on this
    // stack) or read `row` once this returns, and the ranks are out of step.
    for (MPI_Request& r : ex.recvs) {
      cancel_receive(r);
    }
    free_sends(ex, std::move(row), state);
    fail_communicator(comm,
                      Error(ErrorCode::MpiError, rank,
                            fmt::format("{}: the exchange of the call's signature failed", what)));
    throw;
  }
  release_sends(ex, std::move(row), state, rank);
  if (arrival.aborted) {
    const Error error = aborted_error(
        rank, fmt::format("while {} waited for the other ranks", describe_call(what, label)));
    fail_communicator(comm, error);
    throw error;
  }
  const std::vector<std::string>& missing = arrival.missing;
  if (!missing.empty()) {
    const std::string call = describe_call(what, label);
    const Error error(
        ErrorCode::Timeout, rank,
        fmt::format("{}: {} did not reach this call within {} s: stuck, dead, or in another "
                    "call; nothing was moved, the communicator has failed, and its later calls "
                    "fail with this error",
                    call, fmt::join(missing, ", "), timeout_s));
    fail_communicator(comm, error);
    throw error;
  }
  judge_signatures(what, label, rows, locally_valid, rank);
}

void fail_communicator(const Communicator& comm, const Error& error) {
  const CommunicatorState& state = comm.state();
  if (!state.failure) state.failure = error;
  if (state.arena) state.arena->poison();
  poison_device_arenas(state);
}

bool leaves_ranks_out_of_step(const Error& error) {
  switch (error.code()) {
    case ErrorCode::InvalidArgument:
    case ErrorCode::Mismatch:
    case ErrorCode::Finalized:
      return false;
    default:
      return true;
  }
}

void check_not_failed(const Communicator& comm) {
  const CommunicatorState& state = comm.state();
  if (state.failure) throw *state.failure;
  if (state.abort_signal.raised()) {
    // Aborted between calls: this (calling) thread fails it, so that peers
    // waiting on this rank through shared memory stop too.
    const Error error = aborted_error(comm.rank(), "before this call");
    fail_communicator(comm, error);
    throw error;
  }
  check_device_failure(comm);
}

}  // namespace concord::detail
