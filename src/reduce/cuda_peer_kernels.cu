// The one-shot allreduce of cuda_peer_kernels.hpp: ranks of a node meet in device
// memory. Threads [0, ranks) of each block do the meeting, one peer each: they
// publish this block's flag in the peer's flags and poll the peer's flag in this
// rank's own, with a bound on the GPU's clock; the block then learns through one
// barrier whether every peer came. The reduction between the two meetings is
// reduce_many's, in rank order.
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

enum class Meeting { Arrived, Reduced, Left };

template <class T>
struct PeerArgs {
  const T* in[kMaxPeerRanks];
  T* out[kMaxPeerRanks];  // two shot: every rank's; one shot: out[rank] only
  PeerFlags* flags[kMaxPeerRanks];
  PeerTimeout* timeout;
  std::uint64_t timeout_ns;
  std::size_t count;
  std::uint32_t sequence;
  int rank;
  int ranks;
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

// Block blockIdx.x of this rank meets the same block of every rank; true when all
// came within the bound. A thread that gives up on its peer records it.
template <class T>
__device__ bool meet(const PeerArgs<T>& a, Meeting m) {
  const int peer = static_cast<int>(threadIdx.x);
  int late = 0;
  if (peer < a.ranks) {
    __threadfence_system();  // what this rank wrote before comes before its flag
    *static_cast<volatile std::uint32_t*>(flag_slot(a.flags[peer], m, a.rank)) = a.sequence;
    const volatile std::uint32_t* theirs = flag_slot(a.flags[a.rank], m, peer);
    const std::uint64_t start = now_ns();
    while (!reached(*theirs, a.sequence)) {
      if (now_ns() - start > a.timeout_ns) {
        late = 1;
        atomicCAS(&a.timeout->sequence, 0u, a.sequence);
        atomicOr(&a.timeout->missing_ranks, 1u << peer);
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
                                      std::size_t end, std::size_t worker, std::size_t workers,
                                      PackFn pack, OneFn one) {
  constexpr std::size_t kLanes = Pack<T>::kCount;
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

// dst[i] = in[0][i] op in[1][i] ... op in[ranks-1][i] over this worker's share of
// [begin, end): rank order, so every rank computes the same bits.
template <class Op>
__device__ __forceinline__ void reduce_share(const PeerArgs<typename Op::value_type>& a,
                                             typename Op::value_type* dst, std::size_t begin,
                                             std::size_t end, std::size_t worker,
                                             std::size_t workers, Op op) {
  using T = typename Op::value_type;
  constexpr int kLanes = Pack<T>::kCount;
  share(
      a.packable, dst, begin, end, worker, workers,
      [&](std::size_t e) {
        Pack<T> acc = load_pack(a.in[0] + e, 0);
        for (int r = 1; r < a.ranks; ++r) {
          const Pack<T> x = load_pack(a.in[r] + e, 0);
#pragma unroll
          for (int k = 0; k < kLanes; ++k) acc.v[k] = op(acc.v[k], x.v[k]);
        }
        store_pack(dst + e, 0, acc);
      },
      [&](std::size_t e) {
        T acc = a.in[0][e];
        for (int r = 1; r < a.ranks; ++r) acc = op(acc, a.in[r][e]);
        dst[e] = acc;
      });
}

template <class Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    one_shot_kernel(const __grid_constant__ PeerArgs<typename Op::value_type> a, Op op) {
  if (!meet(a, Meeting::Arrived)) return;
  reduce_share(a, a.out[a.rank], 0, a.count, global_thread(), grid_threads(), op);
  __syncthreads();  // every thread of the block is done reading before the block leaves
  meet(a, Meeting::Left);
}

// Two shot's split: rank r reduces shard r, [r * shard, (r + 1) * shard) clipped to the
// count, with shard a whole number of packs; block b takes the b-th contiguous chunk
// of each shard, so that block b of every rank works on the same elements whatever
// its buffers' alignment (the meetings pair blocks by index).
struct Chunk {
  std::size_t begin;
  std::size_t end;
};
template <class T>
__device__ __forceinline__ Chunk chunk_of(const PeerArgs<T>& a, int shard_rank) {
  constexpr std::size_t kLanes = Pack<T>::kCount;
  const auto round_up = [](std::size_t n, std::size_t m) { return (n + m - 1) / m * m; };
  const std::size_t shard = round_up((a.count + a.ranks - 1) / a.ranks, kLanes);
  const std::size_t chunk = round_up((shard + gridDim.x - 1) / gridDim.x, kLanes);
  const std::size_t shard_begin = shard * static_cast<std::size_t>(shard_rank);
  const std::size_t shard_end = shard_begin + shard < a.count ? shard_begin + shard : a.count;
  const std::size_t begin = shard_begin + chunk * blockIdx.x;
  const std::size_t end = begin + chunk < shard_end ? begin + chunk : shard_end;
  return begin < end ? Chunk{begin, end} : Chunk{0, 0};
}

template <class Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    two_shot_kernel(const __grid_constant__ PeerArgs<typename Op::value_type> a, Op op) {
  using T = typename Op::value_type;
  if (!meet(a, Meeting::Arrived)) return;
  // Reduce-scatter: this rank's shard, from every rank's input, into its own output.
  T* mine = a.out[a.rank];
  const Chunk c = chunk_of(a, a.rank);
  reduce_share(a, mine, c.begin, c.end, threadIdx.x, blockDim.x, op);
  __syncthreads();
  if (!meet(a, Meeting::Reduced)) return;
  // Allgather: every other rank's shard, from its output into this one.
  for (int r = 0; r < a.ranks; ++r) {
    if (r == a.rank) continue;
    const T* theirs = a.out[r];
    const Chunk s = chunk_of(a, r);
    share(
        a.packable, mine, s.begin, s.end, threadIdx.x, blockDim.x,
        [&](std::size_t e) { store_pack(mine + e, 0, load_pack(theirs + e, 0)); },
        [&](std::size_t e) { mine[e] = theirs[e]; });
  }
  __syncthreads();
  meet(a, Meeting::Left);
}

// The grid: from the element count alone, so that every rank's kernel has the same
// blocks whatever its buffers' alignment (the meetings pair blocks by index).
template <class T>
unsigned peer_blocks(std::size_t count) {
  const std::size_t per_block = std::size_t{kThreadsPerBlock} * Pack<T>::kCount;
  const std::size_t wanted = (count + per_block - 1) / per_block;
  return static_cast<unsigned>(
      std::max<std::size_t>(1, std::min<std::size_t>(wanted, kMaxPeerBlocks)));
}

enum class Shots { One, Two };

template <class Op>
void launch(Shots shots, Op op, const PeerAllreduce& c, CudaStream stream,
            const std::string& what) {
  using T = typename Op::value_type;
  PeerArgs<T> a{};
  const std::uintptr_t d = address(c.outputs[c.rank]);
  std::uintptr_t mismatch = 0;
  for (int r = 0; r < c.ranks; ++r) {
    a.in[r] = static_cast<const T*>(c.inputs[r]);
    a.out[r] = static_cast<T*>(c.outputs[r]);
    a.flags[r] = c.flags[r];
    mismatch |= d ^ address(c.inputs[r]);
    if (shots == Shots::Two) mismatch |= d ^ address(c.outputs[r]);
  }
  a.timeout = c.timeout;
  a.timeout_ns = c.timeout_ns;
  a.count = c.count;
  a.sequence = c.sequence;
  a.rank = c.rank;
  a.ranks = c.ranks;
  a.packable = (mismatch & 15) == 0 && d % sizeof(T) == 0;
  const unsigned blocks = peer_blocks<T>(c.count);
  if (shots == Shots::One) {
    CONCORD_LAUNCH(blocks, kThreadsPerBlock, stream, one_shot_kernel<Op>)(a, op);
    check_launch("one_shot_kernel", what);
  } else {
    CONCORD_LAUNCH(blocks, kThreadsPerBlock, stream, two_shot_kernel<Op>)(a, op);
    check_launch("two_shot_kernel", what);
  }
}

void check_call(const PeerAllreduce& c, Shots shots, const std::string& where) {
  const auto bad = [&](const std::string& why) { invalid_argument(where + ": " + why); };
  if (static_cast<unsigned>(c.dtype) > static_cast<unsigned>(DataType::Float64) ||
      static_cast<unsigned>(c.op) > static_cast<unsigned>(ReduceOp::Avg)) {
    bad("dtype or op out of range");
  }
  if (!is_supported(c.dtype, c.op)) bad(describe(c.dtype, c.op) + " is not defined");
  if (c.ranks < 1 || c.ranks > kMaxPeerRanks) {
    bad("ranks " + std::to_string(c.ranks) + " outside 1.." + std::to_string(kMaxPeerRanks));
  }
  if (c.rank < 0 || c.rank >= c.ranks) bad("rank " + std::to_string(c.rank) + " outside the ranks");
  if (c.sequence == 0) bad("sequence 0 (calls count from 1)");
  if (c.timeout == nullptr || c.timeout_ns == 0) bad("no timeout record or bound");
  for (int r = 0; r < c.ranks; ++r) {
    const std::string whose = " of rank " + std::to_string(r);
    if (c.flags[r] == nullptr) bad("no flags" + whose);
    if (c.count == 0) continue;
    if (c.inputs[r] == nullptr) bad("null input" + whose);
    if ((r == c.rank || shots == Shots::Two) && c.outputs[r] == nullptr) bad("null output" + whose);
  }
  const std::size_t bytes = c.count * size_of(c.dtype);
  const std::uintptr_t out = address(c.outputs[c.rank]);
  const std::uintptr_t in = address(c.inputs[c.rank]);
  if (c.count > 0 && in < out + bytes && out < in + bytes) {
    bad("the output overlaps the input (peers read the inputs while it is written)");
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

}  // namespace concord::detail::cuda
