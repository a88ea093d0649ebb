// The one place where a collective call becomes a path (NCCL's enqueue.cc, in
// concord's size): validation, where the buffers lie, the path (one rank, shared
// memory, hierarchical, flat over MPI, device, staged through host memory) and
// the construction of the transports it runs on. The public allreduce, the
// engine's buckets, its broadcasts and allgathers and the device path's staged
// chunks all come here; nothing here calls back up into the public API.
#pragma once

#include "collectives/shared/message_view.hpp"

#include <concord/allreduce.hpp>
#include <concord/communicator.hpp>
#include <concord/types.hpp>

#include <cstddef>
#include <vector>

namespace concord::detail {

// Where one allreduce goes. Device buffers take DevicePeer (the device-synchronised
// path), SharedMemory or Hierarchical over the node's CUDA IPC arena, or Staged
// through pinned host memory.
enum class Path { OneRank, SharedMemory, Hierarchical, Flat, Staged, DevicePeer };

// The blocking allreduce (concord::allreduce's contract): validates the arguments
// (errors labelled `what`), classifies the buffers, checks agreement across ranks
// (CONCORD_CHECK_ARGS=1), chooses the path and runs it; Avg is scaled at the end.
void dispatch_allreduce(const char* what, const void* send, void* recv, std::size_t count,
                        DataType dtype, ReduceOp op, const Communicator& comm,
                        const AllreduceOptions& options);

// Throws the error an earlier device allreduce on `comm` left (Error(Timeout): its
// kernels recorded peers that never arrived), failing `comm` with it
// (fail_communicator: its peers waiting on this rank's counters fail too); nothing
// otherwise. Every call on `comm` checks it first (check_not_failed); the engine also
// once a device bucket's work has finished on the GPU.
void check_device_failure(const Communicator& comm);

// The engine's fused buckets reduced where their tensors lie. Whether
// allreduce_tensors_in_place() can run on `comm` with `algorithm`: the same answer on
// every rank; collective the first time (it may set up the shared-memory segment).
bool tensors_in_place_supported(const Communicator& comm, Algorithm algorithm);
// Precondition: tensors_in_place_supported(comm, algorithm); dtype/op supported. Each
// result is scaled by its tensor's factor on its way out.
void allreduce_tensors_in_place(std::vector<TensorSpan> tensors, DataType dtype, ReduceOp op,
                                const Communicator& comm);

// Root's `bytes` at host `buf` to every rank of `comm`.
void dispatch_broadcast(void* buf, std::size_t bytes, int root, const Communicator& comm);
// Rank r's block_bytes[r] host bytes (`mine`) to every rank; `out` gets all blocks
// in rank order.
void dispatch_allgatherv(const void* mine, void* out, const std::vector<std::size_t>& block_bytes,
                         const Communicator& comm);
// send_bytes[r] host bytes of `send` to rank r, recv_bytes[r] from rank r into
// `recv`, blocks in rank order (pairwise exchange over MPI point-to-point).
void dispatch_alltoallv(const void* send, const std::vector<std::size_t>& send_bytes, void* recv,
                        const std::vector<std::size_t>& recv_bytes, const Communicator& comm);

}  // namespace concord::detail
