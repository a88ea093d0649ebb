// The kernels of cuda_peer_kernels.hpp: ranks of a node meet in device memory.
// Threads [0, ranks) of each block do the meeting, one peer each: they publish this
// block's flag in the peer's flags and poll the peer's flag in this rank's own, with
// a bound on the GPU's clock; the block then learns through one barrier whether
// every peer came. Block b owns the same elements on every rank (a contiguous chunk,
// from the count alone), so what block b of a peer has copied in before it arrived is
// exactly what block b here reads. The reduction is reduce_many's, in rank order.
#include "reduce/cuda_peer_kernels.hpp"

#include "cuda/cuda_runtime.hpp"
#include "reduce/cuda_element_ops.cuh"
#include "reduce/cuda_launch.cuh"
#include "reduce/cuda_packs.cuh"

#include <concord/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace concord::detail::cuda {
namespace {

static_assert(kThreadsPerBlock >= kMaxPeerRanks, "a block's threads meet one peer each");
static_assert(kThreadsPerBlock == kPeerThreadsPerBlock, "what the header promises its callers");

enum class Meeting { Arrived, Reduced, Left };

// Who meets whom, and how long a wait may last; `record` gets a wait that ran out.
struct Meet {
  PeerFlags* flags[kMaxPeerRanks];
  int rank;
  int ranks;
  std::uint32_t call;
  std::uint64_t timeout_ns;
  PeerTimeout* record;
};

template <class T>
struct PeerArgs {
  Meet meet;
  T* in[kMaxPeerRanks];
  T* out[kMaxPeerRanks];  // two shot only
  const T* source;        // null: in[rank] holds the data
  T* result;
  std::size_t count;
  bool packable;  // every buffer at the same offset within 16 bytes, a whole element
};

// Nanoseconds on the GPU's global timer (the emulator's clock64 counts nanoseconds).
__device__ __forceinline__ std::uint64_t now_ns() {
#if defined(CONCORD_CUDA_EMULATION)
  return static_cast<std::uint64_t>(clock64());
#else
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

// A polling loop's pause: none on a GPU (one thread per peer spins); on the emulator
// the other threads of the grid take their turn.
__device__ __forceinline__ void pause_polling() {
#if defined(CONCORD_CUDA_EMULATION)
  __nanosleep(0);
#endif
}

__device__ __forceinline__ std::uint32_t* flag_slot(PeerFlags* flags, Meeting m, int from) {
  auto& table = m == Meeting::Arrived   ? flags->arrived
                : m == Meeting::Reduced ? flags->reduced
                                        : flags->left;
  return &table[blockIdx.x][from];
}

// Whether `seen` is call `sequence` or a later one (sequence numbers wrap).
__device__ __forceinline__ bool reached(std::uint32_t seen, std::uint32_t sequence) {
  return static_cast<std::int32_t>(seen - sequence) >= 0;
}

// This block's sequence number for the call now starting: one past the calls it has
// finished. Read by every thread before its first barrier; finish_call writes it
// after the last one.
__device__ __forceinline__ std::uint32_t block_sequence(const Meet& m) {
  return *static_cast<volatile const std::uint32_t*>(&m.flags[m.rank]->calls[blockIdx.x]) + 1;
}
__device__ __forceinline__ void finish_call(const Meet& m, std::uint32_t sequence) {
  if (threadIdx.x == 0) m.flags[m.rank]->calls[blockIdx.x] = sequence;
}

__device__ __forceinline__ std::uint32_t gave_up(const Meet& m) {
  return *static_cast<volatile const std::uint32_t*>(&m.flags[m.rank]->gave_up);
}

// Records that this call is abandoned: the ranks waited for in vain, who gave up
// first; the call last, so that a host seeing it reads the rest.
__device__ void record(const Meet& m, std::uint32_t missing, std::uint32_t who) {
  atomicOr(&m.record->missing_ranks, missing);
  atomicCAS(&m.record->gave_up, 0u, who);
  __threadfence_system();
  atomicCAS(&m.record->call, 0u, m.call);
}

// Tells every rank that this one gave up (the first to do so is named).
__device__ void give_up(const Meet& m) {
  for (int r = 0; r < m.ranks; ++r) {
    atomicCAS(&m.flags[r]->gave_up, 0u, static_cast<std::uint32_t>(m.rank) + 1);
  }
  __threadfence_system();
}

// Whether some rank gave up in an earlier call (or in this one, before this block
// started): then this block records it and ends without meeting anyone. A barrier
// of the block, so that all its threads agree.
__device__ bool abandoned(const Meet& m) {
  const std::uint32_t who = gave_up(m);
  if (__syncthreads_or(who != 0) == 0) return false;
  if (who != 0) record(m, 0, who);
  return true;
}

// Block blockIdx.x of this rank meets the same block of every rank; true when all
// came within the bound. A thread that waits in vain for its peer (its bound ran
// out, or a rank gave up meanwhile) records it; where its own bound ran out it also
// tells every rank.
__device__ bool meet(const Meet& m, Meeting which, std::uint32_t sequence) {
  const int peer = static_cast<int>(threadIdx.x);
  int late = 0;
  if (peer < m.ranks) {
    __threadfence_system();  // what this block wrote before comes before its flag
    *static_cast<volatile std::uint32_t*>(flag_slot(m.flags[peer], which, m.rank)) = sequence;
    const volatile std::uint32_t* theirs = flag_slot(m.flags[m.rank], which, peer);
    const std::uint64_t start = now_ns();
    while (!reached(*theirs, sequence)) {
      if (const std::uint32_t who = gave_up(m); who != 0) {
        late = 1;
        record(m, 1u << peer, who);
        break;
      }
      if (now_ns() - start > m.timeout_ns) {
        late = 1;
        give_up(m);
        record(m, 1u << peer, static_cast<std::uint32_t>(m.rank) + 1);
        break;
      }
      pause_polling();
    }
    __threadfence_system();  // and what the peer wrote before its flag, after it
  }
  return __syncthreads_or(late) == 0;
}

// Hands `worker` of `workers` its share of elements [begin, end): one(i) for single
// elements, pack(i) for the 16-byte pack starting at element i. Packs where the
// buffers allow (`packable`: then every buffer's element `begin` has the same offset
// within 16 bytes as `base`'s), with the elements before the first boundary and after
// the last whole pack one by one.
template <class T, class PackFn, class OneFn>
__device__ __forceinline__ void share(bool packable, const T* base, std::size_t begin,
                                      std::size_t end, PackFn pack, OneFn one) {
  constexpr std::size_t kLanes = Pack<T>::kCount;
  const std::size_t worker = threadIdx.x;
  const std::size_t workers = blockDim.x;
  std::size_t head = end - begin;
  std::size_t packs = 0;
  if (packable) {
    const std::size_t off = (reinterpret_cast<std::uintptr_t>(base + begin) & 15) / sizeof(T);
    head = off == 0 ? 0 : (kLanes - off < end - begin ? kLanes - off : end - begin);
    packs = (end - begin - head) / kLanes;
  }
  for (std::size_t i = worker; i < head; i += workers) one(begin + i);
  const std::size_t first_pack = begin + head;
  for (std::size_t i = worker; i < packs; i += workers) pack(first_pack + i * kLanes);
  for (std::size_t i = first_pack + packs * kLanes + worker; i < end; i += workers) one(i);
}

template <class T>
__device__ __forceinline__ void copy_share(bool packable, T* dst, const T* src, std::size_t begin,
                                           std::size_t end) {
  share(
      packable, dst, begin, end,
      [&](std::size_t e) { store_pack(dst + e, 0, load_pack(src + e, 0)); },
      [&](std::size_t e) { dst[e] = src[e]; });
}

// dst[i] (and dst2[i] unless null) = in[0][i] op in[1][i] ... op in[ranks-1][i] over
// this thread's share of [begin, end): rank order, so every rank computes the same bits.
template <class Op>
__device__ __forceinline__ void reduce_share(const PeerArgs<typename Op::value_type>& a,
                                             typename Op::value_type* dst,
                                             typename Op::value_type* dst2, std::size_t begin,
                                             std::size_t end, Op op) {
  using T = typename Op::value_type;
  constexpr int kLanes = Pack<T>::kCount;
  const int ranks = a.meet.ranks;
  share(
      a.packable, dst, begin, end,
      [&](std::size_t e) {
        Pack<T> acc = load_pack(a.in[0] + e, 0);
        for (int r = 1; r < ranks; ++r) {
          const Pack<T> x = load_pack(a.in[r] + e, 0);
#pragma unroll
          for (int k = 0; k < kLanes; ++k) acc.v[k] = op(acc.v[k], x.v[k]);
        }
        store_pack(dst + e, 0, acc);
        if (dst2 != nullptr) store_pack(dst2 + e, 0, acc);
      },
      [&](std::size_t e) {
        T acc = a.in[0][e];
        for (int r = 1; r < ranks; ++r) acc = op(acc, a.in[r][e]);
        dst[e] = acc;
        if (dst2 != nullptr) dst2[e] = acc;
      });
}

// Block blockIdx.x's chunk of elements [begin, end), whole packs but at the end: the
// same on every rank, from the range alone.
struct Chunk {
  std::size_t begin;
  std::size_t end;
};
template <class T>
__device__ __forceinline__ Chunk block_chunk(std::size_t begin, std::size_t end) {
  constexpr std::size_t kLanes = Pack<T>::kCount;
  const auto round_up = [](std::size_t n, std::size_t m) { return (n + m - 1) / m * m; };
  const std::size_t chunk = round_up((end - begin + gridDim.x - 1) / gridDim.x, kLanes);
  const std::size_t b = begin + chunk * blockIdx.x;
  const std::size_t e = b + chunk < end ? b + chunk : end;
  return b < e ? Chunk{b, e} : Chunk{0, 0};
}

// Two shot's shards: rank r reduces [r * shard, (r + 1) * shard) clipped to the count,
// with shard a whole number of packs.
template <class T>
__device__ __forceinline__ Chunk shard_of(std::size_t count, int ranks, int shard_rank) {
  constexpr std::size_t kLanes = Pack<T>::kCount;
  const std::size_t shard = ((count + ranks - 1) / ranks + kLanes - 1) / kLanes * kLanes;
  const std::size_t begin = shard * static_cast<std::size_t>(shard_rank);
  const std::size_t end = begin + shard < count ? begin + shard : count;
  return begin < end ? Chunk{begin, end} : Chunk{0, 0};
}

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

enum class Shots { One, Two };

Meet meet_of(const PeerAllreduce& c) {
  Meet m{};
  for (int r = 0; r < c.ranks; ++r) m.flags[r] = c.flags[r];
  m.rank = c.rank;
  m.ranks = c.ranks;
  m.call = c.call;
  m.timeout_ns = c.timeout_ns;
  m.record = c.timeout;
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
    if (shots == Shots::Two) mismatch |= d ^ address(c.outputs[r]);
  }
  a.count = c.count;
  a.packable = (mismatch & 15) == 0 && d % sizeof(T) == 0;
  const unsigned blocks = peer_blocks<T>(c.count, c.max_blocks);
  if (shots == Shots::One) {
    CONCORD_LAUNCH(blocks, kThreadsPerBlock, stream, one_shot_kernel<Op>)(a, op);
    check_launch("one_shot_kernel", what);
  } else {
    CONCORD_LAUNCH(blocks, kThreadsPerBlock, stream, two_shot_kernel<Op>)(a, op);
    check_launch("two_shot_kernel", what);
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
    if (shots == Shots::Two && c.outputs[r] == nullptr) bad("null output" + whose);
  }
  const std::size_t bytes = c.count * size_of(c.dtype);
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
  const std::string where =
      shots == Shots::One ? "cuda::one_shot_allreduce" : "cuda::two_shot_allreduce";
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
        });
      }
    }
  });
  return fewest;
}

}  // namespace concord::detail::cuda
