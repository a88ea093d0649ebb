// The allreduce: blocking for host buffers, stream-ordered for CUDA buffers.
#pragma once

#include <concord/communicator.hpp>
#include <concord/types.hpp>

#include <cstddef>
#include <optional>
#include <string_view>

namespace concord {

struct AllreduceOptions {
  // Auto picks by message size, rank count and topology from the tuning table
  // (docs/ALGORITHMS.md). CONCORD_ALLREDUCE_ALGORITHM overrides Auto, never an
  // explicit choice made here. Device buffers take their algorithm from the
  // topology (docs/GPU.md); this field applies to them only where they are
  // staged whole through host memory.
  Algorithm algorithm = Algorithm::Auto;
  // Pipeline segment of the ring algorithm in bytes, 64 B to 1 GiB and the same
  // on every rank; 0 takes CONCORD_RING_SEGMENT_BYTES or the built-in default.
  std::size_t ring_segment_bytes = 0;
  // Where send and recv lie. Unset: asked of the CUDA driver through concord's
  // pointer-attribute cache (host memory in a build without CUDA). Set it to skip
  // the lookup.
  std::optional<Device> device = std::nullopt;
  // CUDA buffers: the stream the call is ordered on, as NCCL's calls are. The
  // allreduce starts after the work queued on it before the call, and work queued
  // on it afterwards sees the result; the call may return before the GPU has done
  // it (docs/GPU.md, "Using it"), so synchronise the stream before the host reads.
  CudaStream stream = nullptr;
  // A call that must fail rather than hang (what a framework's process group
  // promises): > 0 makes the ranks exchange the call's arguments before any data
  // moves, waiting at most this many seconds for each other. Ranks that passed
  // different arguments then fail with Error(Mismatch) on every rank, naming them,
  // with nothing moved; the communicator stays usable. Ranks that have not arrived
  // by then fail the call with Error(Timeout) naming them, and the communicator
  // has failed: every later call on it throws that error again, and a peer that
  // arrives late, or waits for this rank in shared memory, fails too instead of
  // waiting (docs/API.md, "Calls that fail instead of hanging"). Host buffers only
  // (InvalidArgument otherwise);
  // one message to every other rank, so meant for a node's ranks. 0: no exchange
  // (CONCORD_CHECK_ARGS=1 still checks the arguments, within CONCORD_TRANSPORT_TIMEOUT_S).
  double agreement_timeout_s = 0;
  // Names the call in those errors ("all_reduce #3 of group 'default'"); it must
  // outlive the call.
  std::string_view label{};
};

// recv[i] = op over ranks of send[i], for i < count, on every rank of `comm`.
// send == recv means in place. Results are bitwise identical on every rank.
// Collective: every rank must call it with the same count, dtype and op
// (CONCORD_CHECK_ARGS=1 verifies that and names the rank that differs).
// Throws concord::Error on bad arguments or MPI failure.
void allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
               const Communicator& comm, const AllreduceOptions& options = {});

// Whether this build has the CUDA device path, and whether this process sees a
// CUDA device (false, never an error, without a driver or device).
bool cuda_built() noexcept;
bool cuda_available() noexcept;

// The pointer-attribute cache remembers which address ranges are device memory.
// Call this before freeing memory whose addresses may come back as another kind
// (host memory, or another device): e.g. with allocators that map and unmap
// physical memory themselves. Plain cudaMalloc/cudaFree reuse needs no call.
void forget_pointer(const void* ptr) noexcept;
void clear_pointer_cache() noexcept;

}  // namespace concord
