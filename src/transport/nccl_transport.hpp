// Transport over NCCL point-to-point (ncclSend/ncclRecv) between GPUs, for device
// buffers. Stream-ordered: isend/irecv queue operations, wait()/wait_all() launch
// everything queued as one NCCL group on the transport's stream and return without
// waiting for the GPU. Work later queued on the same stream (the CUDA executor's
// reductions) runs after it, so algorithms that touch message memory only through
// that executor see the data; the executor's fence() makes it visible to the host.
//
// Because a group completes only as a whole, only algorithms made of one exchange
// per step (a send, a receive, or a sendrecv, whose two peers may differ: recursive
// doubling, Rabenseifner) may run over it; the pipelined ring, which keeps many
// receives in flight across steps, may not.
#pragma once

#include "core/agreement.hpp"
#include "transport/nccl_library.hpp"
#include "transport/transport.hpp"

#include <mpi.h>

#include <vector>

namespace concord::detail {

// One NCCL communicator over the ranks of an MPI communicator, bootstrapped over
// it (rank 0's ncclUniqueId is broadcast, waited for as `wait` says). Collective
// over `comm` in its constructor. Each rank uses the CUDA device current when it
// is made.
class NcclComm {
 public:
  NcclComm(MPI_Comm comm, int world_rank, const SetupWait& wait = {});
  ~NcclComm();  // ncclCommDestroy (ncclCommAbort when an asynchronous error is pending)
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  int world_rank() const { return world_rank_; }  // for error messages

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  int world_rank_ = 0;
};

class NcclTransport final : public Transport {
 public:
  NcclTransport(const NcclComm& comm, cudaStream_t stream);
  // Launches whatever is still queued (so no peer is left waiting on it).
  ~NcclTransport() override;

  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  Request isend(int peer, const void* buf, std::size_t bytes, int tag) override;
  Request irecv(int peer, void* buf, std::size_t bytes, int tag) override;
  void wait(Request& request) override;
  void wait_all() override;

 private:
  struct Op {
    bool send;
    int peer;
    void* buf;
    std::size_t bytes;
  };
  void flush();

  const NcclComm& comm_;
  cudaStream_t stream_;
  std::vector<Op> queued_;
};

}  // namespace concord::detail
