// Allreduce among the ranks of a node in one kernel per rank, the ranks meeting
// through flags in device memory that each of them maps (CUDA IPC), not on the host:
// no stream synchronisation and no host round trip inside a call (docs/GPU.md,
// "Device-side synchronisation"). Host-callable; enqueues on `stream` and returns.
// Compiled only with CONCORD_WITH_CUDA.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <cstdint>

namespace concord::detail::cuda {

// Ranks of a node one call takes, and the most blocks its kernel runs (every rank's
// kernel runs the same number: block b of each rank meets block b of the others).
inline constexpr int kMaxPeerRanks = 8;
inline constexpr int kMaxPeerBlocks = 64;

// One rank's flags, in device memory that every rank of the node maps, zero-filled
// before the first call. arrived[b][r]: the last call whose block b rank r has
// started (rank r's input is complete by then); reduced[b][r] (two shot): the last
// call whose block b rank r has reduced its part of rank r's shard; left[b][r]: the
// last call whose block b rank r has finished reading its peers' buffers. Written by
// the ranks' kernels only,
// with sequence numbers that only grow, and waited for with "at least": a flag that a
// fast rank has already moved on to its next call still satisfies a slow peer.
struct PeerFlags {
  std::uint32_t arrived[kMaxPeerBlocks][kMaxPeerRanks];
  std::uint32_t reduced[kMaxPeerBlocks][kMaxPeerRanks];
  std::uint32_t left[kMaxPeerBlocks][kMaxPeerRanks];
};

// Where a rank's kernel records a wait that ran out of time, in memory the host
// reads afterwards (mapped pinned memory, or device memory copied back). All zero:
// no wait timed out. Once set it stays: the communicator has failed.
struct PeerTimeout {
  std::uint32_t sequence;       // the first call in which a wait timed out
  std::uint32_t missing_ranks;  // bit r: rank r had not arrived
};

// One rank's part of a call. Every rank passes the same ranks, sequence, count, dtype
// and op, and its own rank; flags[r], inputs[r] and outputs[r] are rank r's, as mapped
// in this process ([rank]: its own). One shot needs only outputs[rank].
struct PeerAllreduce {
  int rank = 0;
  int ranks = 0;
  std::uint32_t sequence = 0;  // 1, 2, ... call by call on a communicator; never 0
  PeerFlags* flags[kMaxPeerRanks] = {};
  const void* inputs[kMaxPeerRanks] = {};
  void* outputs[kMaxPeerRanks] = {};  // outputs[rank] overlaps no input: peers read them
  std::size_t count = 0;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;   // Avg reduces as Sum: the caller scales
  std::uint64_t timeout_ns = 0;  // each wait's bound, on the GPU's clock
  PeerTimeout* timeout = nullptr;
};

// One shot: every rank's kernel reads every rank's input over IPC and reduces them
// in rank order, so every rank gets the same bits (those of the host table, as
// reduce_many). Block b first meets block b of every rank (`arrived`), reduces its
// share of the elements, and meets them again (`left`) before it ends: when the
// kernel has finished on a rank, every rank has finished reading that rank's input,
// which the caller may then change. A wait that runs out of time is recorded in
// `timeout` and ends the kernel; the output is then unspecified. Throws
// Error(InvalidArgument) for a call that breaks the rules above.
void one_shot_allreduce(const PeerAllreduce& call, CudaStream stream);

// Two shot, for larger messages: each rank reads only its shard (about count / ranks
// elements) of every rank's input and reduces it into its own output, then copies
// every other rank's shard from that rank's output into its own: each rank reads
// about 2 * count elements over IPC instead of ranks * count. Three meetings per
// block (arrived, reduced, left); otherwise as one_shot_allreduce, with the same bits.
void two_shot_allreduce(const PeerAllreduce& call, CudaStream stream);

}  // namespace concord::detail::cuda
