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
inline constexpr int kMaxPeerBlocks = 128;
inline constexpr int kPeerThreadsPerBlock = 256;  // every kernel here

// One rank's flags, in device memory that every rank of the node maps, zero-filled
// before the first call. arrived[b][r]: the last call whose block b rank r has
// started (rank r's input is in place by then); reduced[b][r]: the last call whose
// block b rank r has reduced its part of rank r's shard (two shot; one shot and direct
// pass it on unwaited, so that it never falls far behind the calls); left[b][r]: the
// last call whose block b rank r has finished reading its peers' buffers. Written by
// the ranks' kernels only, with sequence numbers that only grow, and waited for with
// "at least": a flag that a fast rank has already moved on to its next call still
// satisfies a slow peer.
//
// calls[b] (read and written by this rank's own kernels only): how many calls block b
// of this rank has finished; a call's sequence number is calls[b] + 1. The count
// lives on the device, not in the kernel's arguments, so that a CUDA graph that
// captured a call numbers every replay afresh; every rank runs the same calls with
// the same grids (the grid follows from the element count), so the ranks' counts
// of block b stay equal.
//
// gave_up: 0, or 1 + the rank whose wait ran out first, with kPeerAborted set where
// that rank gave up because its communicator was aborted (PeerAllreduce::aborted),
// not at the bound. The rank that gives up writes it into every rank's flags; a
// kernel that finds it set (at its start, or while it waits) ends at once and
// records the failure. So once one rank has abandoned a call
// no rank runs another (which would meet peers a call apart and mix their data),
// and the calls queued behind a failure do not each wait out the bound.
inline constexpr std::uint32_t kPeerAborted = 1u << 31;
struct PeerFlags {
  std::uint32_t arrived[kMaxPeerBlocks][kMaxPeerRanks];
  std::uint32_t reduced[kMaxPeerBlocks][kMaxPeerRanks];
  std::uint32_t left[kMaxPeerBlocks][kMaxPeerRanks];
  std::uint32_t calls[kMaxPeerBlocks];
  std::uint32_t gave_up;
};

// Where a rank's kernels record a call they abandoned, in memory the host reads
// afterwards (mapped pinned memory, or device memory copied back). All zero: none
// was. Once set it stays: the communicator has failed. `call` is written last.
struct PeerTimeout {
  std::uint32_t call;           // PeerAllreduce::call of the first call abandoned here
  std::uint32_t missing_ranks;  // bit r: this rank waited for rank r in vain
  std::uint32_t gave_up;        // PeerFlags::gave_up, as learned here
};

// One rank's part of a call. Every rank passes the same ranks, count, dtype, op and
// max_blocks, and its own rank; flags[r], inputs[r] and outputs[r] are rank r's (IPC
// memory), as mapped in this process ([rank]: its own).
//
// The kernel first copies `source` (this rank's data, anywhere on its GPU; may be
// `result` itself) into inputs[rank], block by block, and meets its peers only then:
// so one launch does the whole call. Null `source`: inputs[rank] holds the data.
// `result` (null: outputs[rank]) receives this rank's result. Neither may overlap an
// IPC buffer that peers read (inputs[rank]; two shot: outputs[rank]) unless it is
// that buffer.
struct PeerAllreduce {
  int rank = 0;
  int ranks = 0;
  std::uint32_t call = 0;  // the caller's number for this call (1, 2, ...), for PeerTimeout
  PeerFlags* flags[kMaxPeerRanks] = {};
  void* inputs[kMaxPeerRanks] = {};
  void* outputs[kMaxPeerRanks] = {};  // two shot: every rank's; one shot: unused
  const void* source = nullptr;
  void* result = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;  // Avg reduces as Sum: the caller scales
  int max_blocks = kMaxPeerBlocks;
  std::uint64_t timeout_ns = 0;  // each wait's bound, on the GPU's clock
  PeerTimeout* timeout = nullptr;
  // Host-written memory the kernels can read (mapped pinned), or null: nonzero once
  // this rank's communicator is aborted. A wait that finds it so gives up at once,
  // recording it and telling every rank (kPeerAborted), as at the bound.
  const std::uint32_t* aborted = nullptr;
};

// One shot: every rank's kernel reads every rank's input over IPC and reduces them
// in rank order, so every rank gets the same bits (those of the host table, as
// reduce_many). Block b owns one contiguous chunk of the elements: it copies that
// chunk of `source` in, meets block b of every rank (`arrived`), reduces the chunk
// from every input into `result`, and meets them again (`left`) before it ends: when
// the kernel has finished on a rank, every rank has finished reading that rank's
// input, which its next call may overwrite. A wait that runs out of time is recorded
// in `timeout`, tells every rank (PeerFlags::gave_up) and ends the kernel; the output
// is then unspecified, and every later call on these flags ends at once. Throws
// Error(InvalidArgument) for a call that breaks the rules above.
void one_shot_allreduce(const PeerAllreduce& call, CudaStream stream);

// Two shot, for larger messages: each rank reduces only its shard (about
// count / ranks elements) from every rank's input, into outputs[rank] (and `result`),
// then copies every other rank's shard from that rank's output: each rank reads about
// 2 * count elements over IPC instead of ranks * count. Three meetings per block
// (arrived, reduced, left); otherwise as one_shot_allreduce, with the same bits.
void two_shot_allreduce(const PeerAllreduce& call, CudaStream stream);

// Two shot on the callers' own buffers, with no copy into the arena: inputs[r] and
// outputs[r] are rank r's send and receive buffers as mapped here (CUDA IPC of the
// callers' allocations; [rank]: this rank's own); source and result are unused. Each
// rank reduces its shard from every rank's send buffer and writes it into every rank's
// receive buffer: 2n bytes of memory traffic a rank, what an allreduce's inputs and
// outputs take, and two meetings, `arrived` (every rank's send buffer is ready and its
// receive buffer free) and `left` (every shard written everywhere, no send buffer read
// any more). A send buffer may be its rank's receive buffer: each rank writes only the
// shard it alone reads. Otherwise as two_shot_allreduce, with the same bits.
void direct_allreduce(const PeerAllreduce& call, CudaStream stream);

// Whether the ranks' kernels run at the same time (MPS, or one GPU each), which the
// calls above need to be fast: ranks sharing a GPU without MPS take turns on it, and
// every meeting then waits for the GPU to switch between them. One block meets block
// 0 of every rank `rounds` times (counted in calls[0], as calls), and the kernel
// writes the time it took, or that a wait ran out, to `result` (host-readable).
struct PeerProbeResult {
  std::uint64_t elapsed_ns;  // from the first meeting's start to the last one's end
  PeerTimeout timeout;       // call 1 when a wait ran out of `timeout_ns`, with the missing ranks
};
struct PeerProbe {
  int rank = 0;
  int ranks = 0;
  PeerFlags* flags[kMaxPeerRanks] = {};
  int rounds = 0;
  std::uint64_t timeout_ns = 0;
  PeerProbeResult* result = nullptr;
  const std::uint32_t* aborted = nullptr;  // as PeerAllreduce::aborted
};
void peer_probe(const PeerProbe& probe, CudaStream stream);

// The fewest blocks of the calls' kernels (every dtype and op; one shot, two shot and
// direct) that one multiprocessor of the current device keeps resident at once: what
// set-up sizes the grids by (every block of every rank's kernel must be resident
// together).
int peer_blocks_per_multiprocessor();

}  // namespace concord::detail::cuda
