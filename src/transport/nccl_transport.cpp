#include "transport/nccl_transport.hpp"

#include "core/mpi_check.hpp"
#include "cuda/cuda_runtime.hpp"

#include <concord/error.hpp>

#include <utility>

namespace concord::detail {

NcclComm::NcclComm(MPI_Comm comm, int world_rank, const SetupWait& wait) : world_rank_(world_rank) {
  const NcclLibrary& lib = nccl();
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank", world_rank_);
  check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size", world_rank_);
  // ncclCommInitRank binds the communicator to the current device; the caller has
  // made its device current (cudaSetDevice) before this.
  device_ = cuda::current_device();

  // Rank 0's id goes to everyone together with whether rank 0 got one, so that a
  // failing ncclGetUniqueId fails every rank instead of leaving the others waiting
  // for an id that never comes.
  struct Bootstrap {
    int ok = 0;
    ncclUniqueId id{};
  } bootstrap;
  ncclResult_t id_result = ncclSuccess;
  if (rank_ == 0) {
    id_result = lib.get_unique_id(&bootstrap.id);
    bootstrap.ok = id_result == ncclSuccess ? 1 : 0;
  }
  bootstrap = broadcast_over_ranks(comm, bootstrap, world_rank_, wait);
  // Every rank has the id before any enters ncclCommInitRank, which waits for
  // its peers without a deadline: a rank whose broadcast completed against a
  // peer that had already given up on it (at its deadline) fails here instead.
  least_over_ranks(comm, 1, world_rank_, wait);
  if (rank_ == 0) check_nccl(id_result, "ncclGetUniqueId", world_rank_);
  if (bootstrap.ok == 0) {
    throw Error(ErrorCode::Internal, world_rank_,
                "ncclGetUniqueId failed on rank 0 of the NCCL communicator");
  }

  // Collective over `comm`: returns once every rank has joined. A failed init may
  // still hand back an allocated communicator in an error state; abort frees it.
  const ncclResult_t init = lib.comm_init_rank(&comm_, size_, bootstrap.id, rank_);
  if (init != ncclSuccess) {
    if (comm_ != nullptr) lib.comm_abort(std::exchange(comm_, nullptr));
    check_nccl(init, "ncclCommInitRank", world_rank_);
  }
}

NcclComm::~NcclComm() {
  const NcclLibrary* lib = try_nccl();  // loaded, since comm_ exists
  if (comm_ == nullptr || lib == nullptr) return;
  // NCCL's teardown may make the communicator's device current on this thread;
  // the caller's current device is put back.
  int previous = -1;
  const bool know_previous = cudaGetDevice(&previous) == cudaSuccess;
  // A communicator with an asynchronous error (a peer died, a network failure) may
  // have operations that never finish; ncclCommDestroy would wait for them.
  ncclResult_t async = ncclSuccess;
  if (lib->comm_get_async_error(comm_, &async) != ncclSuccess || async != ncclSuccess) {
    lib->comm_abort(comm_);
  } else {
    lib->comm_destroy(comm_);
  }
  int now = -1;
  if (know_previous && cudaGetDevice(&now) == cudaSuccess && now != previous) {
    cudaSetDevice(previous);
  }
  cudaGetLastError();  // nothing of the teardown is reported from a destructor
}

NcclTransport::NcclTransport(const NcclComm& comm, cudaStream_t stream)
    : comm_(comm), stream_(stream) {}

NcclTransport::~NcclTransport() {
  try {
    flush();
  } catch (...) {
    // A destructor may run while an algorithm's exception unwinds; that error is
    // the one to report.
  }
}

// NCCL ignores tags: it matches sends and receives between a pair of ranks in the
// order they were issued. That is the order the Transport contract promises for
// one tag; algorithms over this transport must not rely on tags to reorder.
Request NcclTransport::isend(int peer, const void* buf, std::size_t bytes, int /*tag*/) {
  const std::size_t index = queued_.size();
  // ncclSend takes a const pointer; Op keeps one pointer type for both directions.
  queued_.push_back(Op{true, peer, const_cast<void*>(buf), bytes});
  return Request{index};
}

Request NcclTransport::irecv(int peer, void* buf, std::size_t bytes, int /*tag*/) {
  const std::size_t index = queued_.size();
  queued_.push_back(Op{false, peer, buf, bytes});
  return Request{index};
}

// Waiting on one request launches everything queued: a group completes as a
// whole, and a receive waited on alone could deadlock against a peer whose send
// to us is queued behind its own receive.
void NcclTransport::wait(Request& request) {
  if (request.slot == Request::kNone) return;
  request.slot = Request::kNone;
  flush();
}

void NcclTransport::wait_all() {
  flush();
}

// One group for every queued operation, so sends and receives between the same
// peers progress together (ncclSend/ncclRecv outside a group block the stream
// until the peer matches them). Returns once the group is enqueued on stream_;
// completion is stream-ordered, the host does not wait.
void NcclTransport::flush() {
  if (queued_.empty()) return;
  const std::vector<Op> ops = std::exchange(queued_, {});
  const NcclLibrary& lib = nccl();
  const int rank = comm_.world_rank();
  check_nccl(lib.group_start(), "ncclGroupStart", rank);
  ncclResult_t first_error = ncclSuccess;
  const char* failed_call = nullptr;
  for (const Op& op : ops) {
    // Byte counts must match on both sides (NCCL has no MPI-style short receive),
    // so an empty message is empty on both sides and both skip it.
    if (op.bytes == 0) continue;
    const ncclResult_t rc =
        op.send ? lib.send(op.buf, op.bytes, ncclInt8, op.peer, comm_.get(), stream_)
                : lib.recv(op.buf, op.bytes, ncclInt8, op.peer, comm_.get(), stream_);
    if (rc != ncclSuccess) {
      first_error = rc;
      failed_call = op.send ? "ncclSend" : "ncclRecv";
      break;
    }
  }
  // ncclGroupEnd also after a failed operation: it closes the group (and reports
  // the group's error), so later NCCL calls on this thread are not left inside it.
  const ncclResult_t end = lib.group_end();
  if (first_error != ncclSuccess) check_nccl(first_error, failed_call, rank);
  check_nccl(end, "ncclGroupEnd", rank);
}

}  // namespace concord::detail
