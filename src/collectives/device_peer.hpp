// The device-synchronised allreduce among the ranks of one node (docs/GPU.md,
// "Device-side synchronisation"): one kernel per rank and piece, the ranks meeting
// through flags in each other's device memory (reduce/cuda_peer_kernels.hpp). A call
// enqueues its kernels on the caller's stream and returns; nothing waits for the GPU,
// so the call can be captured in a CUDA graph.
//
// Cost, per piece of n bytes among p ranks: one launch and two meetings (three for
// two shot), a few microseconds on a GPU whatever n. Memory traffic per rank: one
// shot (p + 2) n (copy in, read every input, write the result); two shot about 5n.
// Ranks on one GPU share its memory bandwidth, so there the traffic is the time of
// large messages; between GPUs, one shot reads (p - 1) n over the links, two shot
// 2 (p - 1) n / p. Hence one shot for small messages (fewest meetings), two shot
// for large ones (least traffic beyond two ranks); the crossover is the tuning
// table's (cuda_peer_one_shot_bytes).
#pragma once

#include "reduce/cuda_peer_kernels.hpp"
#include "reduce/executor.hpp"
#include "transport/shared_arena.hpp"

#include <concord/types.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace concord::detail {

// What the path runs on, set up once per communicator (dispatch/device_peer_path.cpp).
struct PeerSpace {
  // Device memory of every rank of the node: the header holds the rank's PeerFlags,
  // region 0 its inputs, region 1 its outputs (a piece is at most a region).
  SharedArena* arena = nullptr;
  // Host-readable memory the kernels record a wait that ran out in (PeerTimeout).
  cuda::PeerTimeout* record = nullptr;
  // The communicator's rank of each of the arena's ranks, for the error message.
  std::vector<int> comm_ranks;
  // Host memory the kernels read: nonzero once this rank's communicator is aborted
  // (AbortSignal::mirror_into). Null: none.
  const std::uint32_t* aborted = nullptr;
  std::uint64_t timeout_ns = 0;  // each wait's bound on the GPU's clock
  int blocks = 1;                // each kernel's most blocks, the same on every rank
  std::uint32_t calls = 0;       // kernels launched so far; numbers the next one
};

// Throws when a kernel on `space` recorded a call it abandoned, labelled `rank`:
// Error(Timeout) naming the call, the ranks that did not arrive and the bound, or
// the rank whose abort ended it; Error(Shutdown) where that was this rank's own
// abort. Once that has happened every later check throws again: the communicator
// has failed.
void check_peer_space(const PeerSpace& space, int rank);

// recv = the reduction of every rank's send (Avg reduces as Sum: the caller scales),
// queued on `stream`. send may be recv. The message goes in pieces of at most one
// region, each piece by one shot up to `one_shot_bytes` and by two shot above. Every
// rank of the arena calls it with the same count, dtype and op.
void allreduce_device_peer(PeerSpace& space, std::size_t one_shot_bytes, const void* send,
                           void* recv, std::size_t count, DataType dtype, ReduceOp op,
                           CudaStream stream);

// The callers' own buffers of every rank of the arena, as mapped in this process
// ([rank]: this rank's own).
struct PeerBuffers {
  const void* sends[cuda::kMaxPeerRanks] = {};
  void* recvs[cuda::kMaxPeerRanks] = {};
};

// The same allreduce straight on those buffers (cuda::direct_allreduce), in pieces of
// a region: no copy into the arena, 2n bytes of traffic a rank.
void allreduce_device_peer_direct(PeerSpace& space, const PeerBuffers& buffers, std::size_t count,
                                  DataType dtype, ReduceOp op, CudaStream stream);

// Every rank's `bytes` at `mine` into `all` (rank order), through the boards and
// counters of the space's arena: a meeting of the ranks on the host, the `exchanges`th
// (counted by the caller from 1, the same on every rank). At most kExchangeBytes; each
// rank's board holds the last two exchanges, so a slow peer still reads the one it
// waits for. Bounded as the kernels' waits are (timeout_ns): past it, Error(Timeout)
// naming the ranks that did not come, in the words of check_peer_space.
inline constexpr std::size_t kExchangeBytes = SharedArena::kBoardBytes / 2;
void exchange_on_boards(const PeerSpace& space, std::uint64_t exchanges, const void* mine,
                        std::size_t bytes, void* all);

// Whether the ranks' kernels run at the same time: the mean of `rounds` meetings in
// one kernel per rank (each bounded by `bound_ns`), after one meeting that absorbs
// the ranks' different start times. Synchronises the stream (`fence`: the executor
// of `stream`). `result` is host-readable memory for the kernels' answer.
struct ProbeOutcome {
  bool timed_out = false;
  double mean_meeting_ns = 0;  // of the timed rounds, when none timed out
};
ProbeOutcome probe_peer_concurrency(PeerSpace& space, cuda::PeerProbeResult* result, int rounds,
                                    std::uint64_t bound_ns, CudaStream stream, Executor& fence);

}  // namespace concord::detail
