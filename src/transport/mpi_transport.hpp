// Transport over MPI point-to-point on concord's private duplicate communicator.
#pragma once

#include "core/abort_signal.hpp"
#include "transport/transport.hpp"

#include "core/mpi_wait.hpp"

#include <mpi.h>

#include <string>
#include <vector>

namespace concord::detail {

class MpiTransport final : public Transport {
 public:
  // Waits fail with ErrorCode::Timeout after CONCORD_TRANSPORT_TIMEOUT_S without
  // a completion, or after `timeout_s` (0: never); and with ErrorCode::Shutdown
  // once `abort` (the communicator's, null: none) is raised.
  explicit MpiTransport(MPI_Comm comm, const AbortSignal* abort = nullptr);
  MpiTransport(MPI_Comm comm, double timeout_s, const AbortSignal* abort = nullptr);
  // Pending requests are completed (errors swallowed) so no MPI request outlives
  // the buffers it points into, also when an algorithm throws; after a wait
  // timed out (CONCORD_TRANSPORT_TIMEOUT_S) or was aborted, receives are
  // cancelled (cancel_receive: no late message lands in their buffers) and
  // sends freed, unfinished: the peer is presumed gone, or this rank is leaving.
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Request isend(int peer, const void* buf, std::size_t bytes, int tag) override;
  Request irecv(int peer, void* buf, std::size_t bytes, int tag) override;
  void wait(Request& request) override;
  void wait_all() override;

 private:
  std::size_t take_slot(int peer, bool receive);
  void check_count(std::size_t bytes) const;
  // Marks the transport abandoned (its destructor then frees, rather than waits
  // on, what is pending) and throws, naming `waiting_on`, ErrorCode::Timeout or
  // (`polled` aborted) ErrorCode::Shutdown.
  [[noreturn]] void throw_abandoned(const PollResult& polled, const std::string& waiting_on);
  std::string pending_peers() const;
  std::string describe_peer(int peer) const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  double timeout_s_ = 0;
  const AbortSignal* abort_ = nullptr;
  std::vector<MPI_Request> slots_;   // MPI_REQUEST_NULL when free
  std::vector<int> slot_peers_;      // the peer of each slot's request
  std::vector<bool> slot_receives_;  // whether it is a receive (cancelled when abandoned)
  std::vector<std::size_t> free_slots_;
  bool abandoned_ = false;
};

}  // namespace concord::detail
