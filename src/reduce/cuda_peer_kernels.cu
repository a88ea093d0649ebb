// The kernels of cuda_peer_kernels.hpp, made of the meetings of cuda_peer_meet.cuh:
// ranks of a node meet in device memory. The reduction is reduce_many's, in rank order.
#include "reduce/cuda_peer_kernels.hpp"

#include "cuda/cuda_runtime.hpp"
#include "reduce/cuda_element_ops.cuh"
#include "reduce/cuda_launch.cuh"
#include "reduce/cuda_packs.cuh"
#include "reduce/cuda_peer_meet.cuh"

#include <concord/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace concord::detail::cuda {
namespace {

using namespace peer;

static_assert(kThreadsPerBlock >= kMaxPeerRanks, "a block's threads meet one peer each");
static_assert(kThreadsPerBlock == kPeerThreadsPerBlock, "what the header promises its callers");

template <class Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    one_shot_kernel(const __grid_constant__ PeerArgs<typename Op::value_type> a, Op op) {
  using T = typename Op::value_type;
  const std::uint32_t sequence = block_sequence(a.meet);
  const Chunk c = block_chunk<T>(0, a.count);
  T* mine = a.in[a.meet.rank];
  if (a.source != nullptr) copy_share(a.packable, mine, a.source, c.begin, c.end);
  if (abandoned(a.meet)) return;  // (a barrier: the block's copy is done)
  if (!meet(a.meet, Meeting::Arrived, sequence)) return;
  reduce_share(a, a.result, nullptr, c.begin, c.end, op);
  __syncthreads();  // every thread of the block is done reading before the block leaves
  pass(a.meet, Meeting::Reduced, sequence);
  if (!meet(a.meet, Meeting::Left, sequence)) return;
  finish_call(a.meet, sequence);
}

template <class Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    two_shot_kernel(const __grid_constant__ PeerArgs<typename Op::value_type> a, Op op) {
  using T = typename Op::value_type;
  const int me = a.meet.rank;
  const int ranks = a.meet.ranks;
  const std::uint32_t sequence = block_sequence(a.meet);
  // This block's chunk of every shard in: what block b of each peer reduces from it.
  if (a.source != nullptr) {
    for (int r = 0; r < ranks; ++r) {
      const Chunk s = shard_of<T>(a.count, ranks, r);
      const Chunk c = block_chunk<T>(s.begin, s.end);
      copy_share(a.packable, a.in[me], a.source, c.begin, c.end);
    }
  }
  if (abandoned(a.meet)) return;  // (a barrier: the block's copy is done)
  if (!meet(a.meet, Meeting::Arrived, sequence)) return;
  // Reduce-scatter: this block's chunk of this rank's shard, from every rank's input.
  T* shard_out = a.out[me];
  const Chunk shard = shard_of<T>(a.count, ranks, me);
  const Chunk own = block_chunk<T>(shard.begin, shard.end);
  reduce_share(a, shard_out, a.result == shard_out ? nullptr : a.result, own.begin, own.end, op);
  __syncthreads();
  if (!meet(a.meet, Meeting::Reduced, sequence)) return;
  // Allgather: the same chunk of every other rank's shard, from its output.
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    const Chunk s = shard_of<T>(a.count, ranks, r);
    const Chunk c = block_chunk<T>(s.begin, s.end);
    copy_share(a.packable, a.result, a.out[r], c.begin, c.end);
  }
  __syncthreads();
  if (!meet(a.meet, Meeting::Left, sequence)) return;
  finish_call(a.meet, sequence);
}

template <class Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    direct_kernel(const __grid_constant__ PeerArgs<typename Op::value_type> a, Op op) {
  using T = typename Op::value_type;
  const std::uint32_t sequence = block_sequence(a.meet);
  if (abandoned(a.meet)) return;
  if (!meet(a.meet, Meeting::Arrived, sequence)) return;
  const Chunk shard = shard_of<T>(a.count, a.meet.ranks, a.meet.rank);
  const Chunk own = block_chunk<T>(shard.begin, shard.end);
  reduce_to_all(a, own.begin, own.end, op);
  __syncthreads();  // the block's writes, everywhere, before it tells its peers
  pass(a.meet, Meeting::Reduced, sequence);
  if (!meet(a.meet, Meeting::Left, sequence)) return;
  finish_call(a.meet, sequence);
}

// Its rounds meet on Arrived alone, leaving Reduced and Left behind the calls by their
// number: a set-up's few, far from the 2^31 at which reached() would misread them.
__global__ void __launch_bounds__(kThreadsPerBlock)
    probe_kernel(const __grid_constant__ Meet m, int rounds, PeerProbeResult* result) {
  const std::uint64_t start = now_ns();
  for (int k = 0; k < rounds; ++k) {
    const std::uint32_t sequence = block_sequence(m);
    __syncthreads();  // every thread has read the count before thread 0 moves it
    if (!meet(m, Meeting::Arrived, sequence)) return;
    finish_call(m, sequence);
    __syncthreads();
  }
  if (threadIdx.x == 0) result->elapsed_ns = now_ns() - start;
}

// The grid: from the element count alone, so that every rank's kernel has the same
// blocks whatever its buffers' alignment (the meetings pair blocks by index).
template <class T>
unsigned peer_blocks(std::size_t count, int max_blocks) {
  const std::size_t per_block = std::size_t{kThreadsPerBlock} * Pack<T>::kCount;
  const std::size_t wanted = (count + per_block - 1) / per_block;
  return static_cast<unsigned>(std::max<std::size_t>(
      1, std::min<std::size_t>(wanted, static_cast<std::size_t>(max_blocks))));
}

enum class Shots { One, Two, Direct };

Meet meet_of(const PeerAllreduce& c) {
  Meet m{};
  for (int r = 0; r < c.ranks; ++r) m.flags[r] = c.flags[r];
  m.rank = c.rank;
  m.ranks = c.ranks;
  m.call = c.call;
  m.timeout_ns = c.timeout_ns;
  m.record = c.timeout;
  m.aborted = c.aborted;
  return m;
}

template <class Op>
void launch(Shots shots, Op op, const PeerAllreduce& c, CudaStream stream,
            const std::string& what) {
  using T = typename Op::value_type;
  PeerArgs<T> a{};
  a.meet = meet_of(c);
  a.source = c.source != nullptr && c.source != c.inputs[c.rank] ? static_cast<const T*>(c.source)
                                                                 : nullptr;
  a.result = static_cast<T*>(c.result != nullptr ? c.result : c.outputs[c.rank]);
  const std::uintptr_t d = address(a.result);
  std::uintptr_t mismatch = a.source != nullptr ? d ^ address(a.source) : 0;
  for (int r = 0; r < c.ranks; ++r) {
    a.in[r] = static_cast<T*>(c.inputs[r]);
    a.out[r] = static_cast<T*>(c.outputs[r]);
    mismatch |= d ^ address(c.inputs[r]);
    if (shots != Shots::One) mismatch |= d ^ address(c.outputs[r]);
  }
  a.count = c.count;
  a.packable = (mismatch & 15) == 0 && d % sizeof(T) == 0;
  const unsigned blocks = peer_blocks<T>(c.count, c.max_blocks);
  if (shots == Shots::One) {
    CONCORD_LAUNCH(blocks, kThreadsPerBlock, stream, one_shot_kernel<Op>)(a, op);
    check_launch("one_shot_kernel", what);
  } else if (shots == Shots::Two) {
    CONCORD_LAUNCH(blocks, kThreadsPerBlock, stream, two_shot_kernel<Op>)(a, op);
    check_launch("two_shot_kernel", what);
  } else {
    CONCORD_LAUNCH(blocks, kThreadsPerBlock, stream, direct_kernel<Op>)(a, op);
    check_launch("direct_kernel", what);
  }
}

bool overlap(const void* a, const void* b, std::size_t bytes) {
  return bytes > 0 && address(a) < address(b) + bytes && address(b) < address(a) + bytes;
}

// Rules the calls and the probe share: ranks, flags, timeout. `bad` throws.
template <class Bad>
void check_meeting(int rank, int ranks, PeerFlags* const* flags, std::uint64_t timeout_ns,
                   const void* record, const Bad& bad) {
  if (ranks < 1 || ranks > kMaxPeerRanks) {
    bad("ranks " + std::to_string(ranks) + " outside 1.." + std::to_string(kMaxPeerRanks));
  }
  if (rank < 0 || rank >= ranks) bad("rank " + std::to_string(rank) + " outside the ranks");
  if (record == nullptr || timeout_ns == 0) bad("no timeout record or bound");
  for (int r = 0; r < ranks; ++r) {
    if (flags[r] == nullptr) bad("no flags of rank " + std::to_string(r));
  }
}

void check_call(const PeerAllreduce& c, Shots shots, const std::string& where) {
  const auto bad = [&](const std::string& why) { invalid_argument(where + ": " + why); };
  if (static_cast<unsigned>(c.dtype) > static_cast<unsigned>(DataType::Float64) ||
      static_cast<unsigned>(c.op) > static_cast<unsigned>(ReduceOp::Avg)) {
    bad("dtype or op out of range");
  }
  if (!is_supported(c.dtype, c.op)) bad(describe(c.dtype, c.op) + " is not defined");
  check_meeting(c.rank, c.ranks, c.flags, c.timeout_ns, c.timeout, bad);
  if (c.call == 0) bad("call 0 (calls count from 1)");
  if (c.max_blocks < 1 || c.max_blocks > kMaxPeerBlocks) {
    bad("max_blocks " + std::to_string(c.max_blocks) + " outside 1.." +
        std::to_string(kMaxPeerBlocks));
  }
  if (c.count == 0) return;
  for (int r = 0; r < c.ranks; ++r) {
    const std::string whose = " of rank " + std::to_string(r);
    if (c.inputs[r] == nullptr) bad("null input" + whose);
    if (shots != Shots::One && c.outputs[r] == nullptr) bad("null output" + whose);
  }
  const std::size_t bytes = c.count * size_of(c.dtype);
  if (shots == Shots::Direct) {
    if (c.source != nullptr || c.result != nullptr) {
      bad("source or result given (the direct kernel reads inputs and writes outputs)");
    }
    if (c.inputs[c.rank] != c.outputs[c.rank] &&
        overlap(c.inputs[c.rank], c.outputs[c.rank], bytes)) {
      bad("this rank's output overlaps its input without being it");
    }
    return;
  }
  const void* result = c.result != nullptr ? c.result : c.outputs[c.rank];
  const void* mine = c.inputs[c.rank];
  if (result == nullptr) bad("no result (null result and output)");
  if (overlap(result, mine, bytes)) {
    bad("the result overlaps this rank's input buffer (peers read it while the result is "
        "written)");
  }
  if (shots == Shots::Two && result != c.outputs[c.rank] &&
      overlap(result, c.outputs[c.rank], bytes)) {
    bad("the result overlaps this rank's output buffer (peers read it while the result is "
        "written)");
  }
  if (c.source != nullptr && c.source != mine && overlap(c.source, mine, bytes)) {
    bad("the source overlaps this rank's input buffer without being it");
  }
}

void run(Shots shots, const PeerAllreduce& call, CudaStream stream) {
  const std::string where = shots == Shots::One   ? "cuda::one_shot_allreduce"
                            : shots == Shots::Two ? "cuda::two_shot_allreduce"
                                                  : "cuda::direct_allreduce";
  guarded(where.c_str(), [&] {
    check_call(call, shots, where);
    const std::string what = describe(call.dtype, call.op);
    ops::visit_reduce_op(call.dtype, call.op,
                         [&](auto f) { launch(shots, f, call, stream, what); });
  });
}

}  // namespace

void one_shot_allreduce(const PeerAllreduce& call, CudaStream stream) {
  run(Shots::One, call, stream);
}

void two_shot_allreduce(const PeerAllreduce& call, CudaStream stream) {
  run(Shots::Two, call, stream);
}

void direct_allreduce(const PeerAllreduce& call, CudaStream stream) {
  run(Shots::Direct, call, stream);
}

void peer_probe(const PeerProbe& probe, CudaStream stream) {
  guarded("cuda::peer_probe", [&] {
    const auto bad = [](const std::string& why) { invalid_argument("cuda::peer_probe: " + why); };
    check_meeting(probe.rank, probe.ranks, probe.flags, probe.timeout_ns, probe.result, bad);
    if (probe.rounds < 1) bad("rounds " + std::to_string(probe.rounds) + " (at least 1)");
    Meet m{};
    for (int r = 0; r < probe.ranks; ++r) m.flags[r] = probe.flags[r];
    m.rank = probe.rank;
    m.ranks = probe.ranks;
    m.call = 1;
    m.timeout_ns = probe.timeout_ns;
    m.record = &probe.result->timeout;
    m.aborted = probe.aborted;
    CONCORD_LAUNCH(1, kThreadsPerBlock, stream, probe_kernel)(m, probe.rounds, probe.result);
    check_launch("probe_kernel", "probe");
  });
}

int peer_blocks_per_multiprocessor() {
  int fewest = 0;
  guarded("cuda::peer_blocks_per_multiprocessor", [&] {
    const auto resident = [&](auto kernel) {
      int blocks = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreadsPerBlock, 0),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      fewest = fewest == 0 ? blocks : std::min(fewest, blocks);
    };
    for (int d = 0; d <= static_cast<int>(DataType::Float64); ++d) {
      for (int o = 0; o <= static_cast<int>(ReduceOp::Avg); ++o) {
        const auto dtype = static_cast<DataType>(d);
        const auto op = static_cast<ReduceOp>(o);
        if (!is_supported(dtype, op)) continue;
        ops::visit_reduce_op(dtype, op, [&](auto f) {
          using Op = decltype(f);
          resident(one_shot_kernel<Op>);
          resident(two_shot_kernel<Op>);
          resident(direct_kernel<Op>);
        });
      }
    }
  });
  return fewest;
}

}  // namespace concord::detail::cuda
