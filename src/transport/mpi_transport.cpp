#include "transport/mpi_transport.hpp"

#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/mpi_wait.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>

namespace concord::detail {

MpiTransport::MpiTransport(MPI_Comm comm, const AbortSignal* abort)
    : MpiTransport(comm, config().transport_timeout_s, abort) {}

MpiTransport::MpiTransport(MPI_Comm comm, double timeout_s, const AbortSignal* abort)
    : comm_(comm), timeout_s_(timeout_s), abort_(abort) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", rank_);
}

MpiTransport::~MpiTransport() {
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    MPI_Request& r = slots_[slot];
    if (r == MPI_REQUEST_NULL) continue;
    if (!abandoned_) {
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      continue;
    }
    // After a timeout the peer is presumed gone, after an abort this rank is
    // leaving: waiting would hang the unwind. A receive is cancelled, since its
    // buffer (the caller's, or a scratch buffer that later calls reuse) must not
    // take a late message; a send is handed to MPI to finish or drop. The
    // communicator is unusable and the error says so.
    if (slot_receives_[slot]) {
      cancel_receive(r);
    } else {
      MPI_Request_free(&r);
    }
  }
}

std::size_t MpiTransport::take_slot(int peer, bool receive) {
  if (!free_slots_.empty()) {
    std::size_t slot = free_slots_.back();
    free_slots_.pop_back();
    slot_peers_[slot] = peer;
    slot_receives_[slot] = receive;
    return slot;
  }
  slots_.push_back(MPI_REQUEST_NULL);
  slot_peers_.push_back(peer);
  slot_receives_.push_back(receive);
  return slots_.size() - 1;
}

// MPI 4 large-count calls take any byte count; older MPIs are limited to INT_MAX
// per message. The blocking allreduce checks that before any data moves; this
// check keeps every other caller (the engine's broadcast and allgather) from
// truncating a count silently.
void MpiTransport::check_count(std::size_t bytes) const {
#if MPI_VERSION < 4
  if (bytes > static_cast<std::size_t>(INT_MAX)) {
    throw Error(ErrorCode::InvalidArgument, rank_,
                fmt::format("a message of {} bytes: this MPI (version {}.{}) takes at most {} "
                            "bytes per message; MPI 4 has no such limit",
                            bytes, MPI_VERSION, MPI_SUBVERSION, INT_MAX));
  }
#else
  (void)bytes;
#endif
}

Request MpiTransport::isend(int peer, const void* buf, std::size_t bytes, int tag) {
  check_count(bytes);
  std::size_t slot = take_slot(peer, false);
#if MPI_VERSION >= 4
  int rc =
      MPI_Isend_c(buf, static_cast<MPI_Count>(bytes), MPI_BYTE, peer, tag, comm_, &slots_[slot]);
#else
  int rc = MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &slots_[slot]);
#endif
  if (rc != MPI_SUCCESS) free_slots_.push_back(slot);
  check_mpi(rc, "MPI_Isend", rank_);
  return Request{slot};
}

Request MpiTransport::irecv(int peer, void* buf, std::size_t bytes, int tag) {
  check_count(bytes);
  std::size_t slot = take_slot(peer, true);
#if MPI_VERSION >= 4
  int rc =
      MPI_Irecv_c(buf, static_cast<MPI_Count>(bytes), MPI_BYTE, peer, tag, comm_, &slots_[slot]);
#else
  int rc = MPI_Irecv(buf, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm_, &slots_[slot]);
#endif
  if (rc != MPI_SUCCESS) free_slots_.push_back(slot);
  check_mpi(rc, "MPI_Irecv", rank_);
  return Request{slot};
}

void MpiTransport::throw_abandoned(const PollResult& polled, const std::string& waiting_on) {
  abandoned_ = true;
  if (polled.aborted) throw aborted_error(rank_, "while waiting on " + waiting_on);
  throw timeout_error(rank_, timeout_s_, waiting_on, "this communicator is unusable");
}

void MpiTransport::wait(Request& request) {
  if (request.slot == Request::kNone) return;
  std::size_t slot = request.slot;
  request.slot = Request::kNone;
  PollResult result =
      poll_until_done([&](int* done) { return MPI_Test(&slots_[slot], done, MPI_STATUS_IGNORE); },
                      timeout_s_, Patience::Busy, abort_);
  if (result.timed_out || result.aborted) {
    throw_abandoned(result, describe_peer(slot_peers_[slot]));
  }
  free_slots_.push_back(slot);
  check_mpi(result.rc, "MPI_Wait", rank_);
}

void MpiTransport::wait_all() {
  if (slots_.empty()) return;
  PollResult result = poll_until_done(
      [&](int* done) {
        return MPI_Testall(static_cast<int>(slots_.size()), slots_.data(), done,
                           MPI_STATUSES_IGNORE);
      },
      timeout_s_, Patience::Busy, abort_);
  if (result.timed_out || result.aborted) throw_abandoned(result, pending_peers());
  free_slots_.clear();
  for (std::size_t i = 0; i < slots_.size(); ++i) free_slots_.push_back(i);
  check_mpi(result.rc, "MPI_Waitall", rank_);
}

std::string MpiTransport::pending_peers() const {
  std::vector<int> peers;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i] != MPI_REQUEST_NULL) peers.push_back(slot_peers_[i]);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  std::vector<std::string> names;
  for (int peer : peers) names.push_back(describe_peer(peer));
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string MpiTransport::describe_peer(int peer) const {
  return detail::describe_peer(comm_, peer);
}

}  // namespace concord::detail
