// Transport over MPI point-to-point on concord's private duplicate communicator.
#pragma once

#include "transport/transport.hpp"

#include <mpi.h>

#include <vector>

namespace concord::detail {

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MPI_Comm comm);
  // Pending requests are completed (errors swallowed) so no MPI request outlives
  // the buffers it points into, also when an algorithm throws.
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
  std::size_t take_slot();
  void check_count(std::size_t bytes) const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<MPI_Request> slots_;  // MPI_REQUEST_NULL when free
  std::vector<std::size_t> free_slots_;
};

}  // namespace concord::detail
