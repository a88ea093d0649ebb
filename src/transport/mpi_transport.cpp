#include "transport/mpi_transport.hpp"

#include "core/mpi_check.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <climits>

#include <sched.h>

namespace concord::detail {

MpiTransport::MpiTransport(MPI_Comm comm) : comm_(comm) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", rank_);
}

MpiTransport::~MpiTransport() {
  for (MPI_Request& r : slots_) {
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
}

std::size_t MpiTransport::take_slot() {
  if (!free_slots_.empty()) {
    std::size_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  slots_.push_back(MPI_REQUEST_NULL);
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
  std::size_t slot = take_slot();
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
  std::size_t slot = take_slot();
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

namespace {

// Polls `test` (which drives MPI progress) until it reports completion. After a
// short spin the wait yields the core between polls: MPICH's own MPI_Wait spins
// without yielding, which makes runs with more ranks than cores crawl (each
// message then waits for a scheduler time slice).
template <typename Test>
int poll_until_done(Test&& test) {
  constexpr int kSpinsBeforeYield = 2000;
  for (int spins = 0;; ++spins) {
    int done = 0;
    if (int rc = test(&done); rc != MPI_SUCCESS) return rc;
    if (done) return MPI_SUCCESS;
    if (spins >= kSpinsBeforeYield) sched_yield();
  }
}

}  // namespace

void MpiTransport::wait(Request& request) {
  if (request.slot == Request::kNone) return;
  std::size_t slot = request.slot;
  request.slot = Request::kNone;
  int rc =
      poll_until_done([&](int* done) { return MPI_Test(&slots_[slot], done, MPI_STATUS_IGNORE); });
  free_slots_.push_back(slot);
  check_mpi(rc, "MPI_Wait", rank_);
}

void MpiTransport::wait_all() {
  if (slots_.empty()) return;
  int rc = poll_until_done([&](int* done) {
    return MPI_Testall(static_cast<int>(slots_.size()), slots_.data(), done, MPI_STATUSES_IGNORE);
  });
  free_slots_.clear();
  for (std::size_t i = 0; i < slots_.size(); ++i) free_slots_.push_back(i);
  check_mpi(rc, "MPI_Waitall", rank_);
}

}  // namespace concord::detail
