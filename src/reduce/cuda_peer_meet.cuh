// What the device-synchronised kernels (cuda_peer_kernels.cu) are made of: the flags'
// meetings, the record of a call abandoned, and the split of the elements among blocks
// and ranks. CUDA only; included by cuda_peer_kernels.cu alone.
//
// Threads [0, ranks) of each block do the meeting, one peer each: they publish this
// block's flag in the peer's flags and poll the peer's flag in this rank's own, with a
// bound on the GPU's clock; the block then learns through one barrier whether every
// peer came. Block b owns the same elements on every rank (a contiguous chunk, from
// the count alone), so what block b of a peer has done before it arrived is exactly
// what block b here relies on.
#pragma once

#include "reduce/cuda_launch.cuh"
#include "reduce/cuda_packs.cuh"
#include "reduce/cuda_peer_kernels.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace concord::detail::cuda::peer {

enum class Meeting { Arrived, Reduced, Left };

// Who meets whom, and how long a wait may last; `record` gets a wait that ran out;
// `aborted` (host memory, or null) turns nonzero once this rank's communicator is
// aborted (PeerAllreduce::aborted).
struct Meet {
  PeerFlags* flags[kMaxPeerRanks];
  int rank;
  int ranks;
  std::uint32_t call;
  std::uint64_t timeout_ns;
  PeerTimeout* record;
  const std::uint32_t* aborted;
};

template <class T>
struct PeerArgs {
  Meet meet;
  T* in[kMaxPeerRanks];
  T* out[kMaxPeerRanks];  // two shot and direct only
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
__device__ inline void record(const Meet& m, std::uint32_t missing, std::uint32_t who) {
  atomicOr(&m.record->missing_ranks, missing);
  atomicCAS(&m.record->gave_up, 0u, who);
  __threadfence_system();
  atomicCAS(&m.record->call, 0u, m.call);
}

// Tells every rank that this one gave up, `who` saying why (PeerFlags::gave_up;
// the first to give up is named).
__device__ inline void give_up(const Meet& m, std::uint32_t who) {
  for (int r = 0; r < m.ranks; ++r) atomicCAS(&m.flags[r]->gave_up, 0u, who);
  __threadfence_system();
}

// Whether this rank's communicator was aborted. The word lies in host memory, a
// read across the bus of a microsecond or so: a wait reads it once every
// kSpinsPerAbortCheck polls of its peer's flag, and a call that meets its peers
// at once never does.
inline constexpr unsigned kSpinsPerAbortCheck = 128;
__device__ __forceinline__ bool aborted_here(const Meet& m) {
  return m.aborted != nullptr && *static_cast<const volatile std::uint32_t*>(m.aborted) != 0;
}

// Whether some rank gave up in an earlier call (or in this one, before this block
// started): then this block records it and ends without meeting anyone. A barrier
// of the block, so that all its threads agree.
__device__ inline bool abandoned(const Meet& m) {
  const std::uint32_t who = gave_up(m);
  if (__syncthreads_or(who != 0) == 0) return false;
  if (who != 0) record(m, 0, who);
  return true;
}

// Block blockIdx.x of this rank meets the same block of every rank; true when all
// came within the bound. A thread that waits in vain for its peer (its bound ran
// out, this rank was aborted, or a rank gave up meanwhile) records it; where its own
// bound ran out or its own rank was aborted it also tells every rank, so that they
// stop waiting too.
__device__ inline bool meet(const Meet& m, Meeting which, std::uint32_t sequence) {
  const int peer = static_cast<int>(threadIdx.x);
  int late = 0;
  if (peer < m.ranks) {
    __threadfence_system();  // what this block wrote before comes before its flag
    *static_cast<volatile std::uint32_t*>(flag_slot(m.flags[peer], which, m.rank)) = sequence;
    const volatile std::uint32_t* theirs = flag_slot(m.flags[m.rank], which, peer);
    const std::uint64_t start = now_ns();
    const std::uint32_t me = static_cast<std::uint32_t>(m.rank) + 1;
    for (unsigned spins = 1; !reached(*theirs, sequence); ++spins) {
      if (const std::uint32_t who = gave_up(m); who != 0) {
        late = 1;
        record(m, 1u << peer, who);
        break;
      }
      const bool abort = spins % kSpinsPerAbortCheck == 0 && aborted_here(m);
      if (abort || now_ns() - start > m.timeout_ns) {
        late = 1;
        const std::uint32_t who = abort ? me | kPeerAborted : me;
        give_up(m, who);
        record(m, 1u << peer, who);
        break;
      }
      pause_polling();
    }
    __threadfence_system();  // and what the peer wrote before its flag, after it
  }
  return __syncthreads_or(late) == 0;
}

// Publishes `which` for this call to every peer without waiting for theirs: how a
// kernel without that meeting (one shot and direct have no Reduced) keeps the flag in
// step with its calls. reached() compares sequence numbers modulo 2^32, so a flag
// left 2^31 calls behind would read as reached, and a later two shot call would copy
// its peers' shards before they are reduced. Ordered before the meeting that follows.
__device__ __forceinline__ void pass(const Meet& m, Meeting which, std::uint32_t sequence) {
  const int peer = static_cast<int>(threadIdx.x);
  if (peer < m.ranks) {
    *static_cast<volatile std::uint32_t*>(flag_slot(m.flags[peer], which, m.rank)) = sequence;
  }
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

// in[0][e] op in[1][e] ... op in[ranks-1][e]: the 16-byte pack at element e, or the element
// alone, in rank order, so that every rank computes the same bits.
template <class Op>
__device__ __forceinline__ Pack<typename Op::value_type> reduced_pack(
    const PeerArgs<typename Op::value_type>& a, std::size_t e, Op op) {
  using T = typename Op::value_type;
  constexpr int kLanes = Pack<T>::kCount;
  Pack<T> acc = load_pack(a.in[0] + e, 0);
  for (int r = 1; r < a.meet.ranks; ++r) {
    const Pack<T> x = load_pack(a.in[r] + e, 0);
#pragma unroll
    for (int k = 0; k < kLanes; ++k) acc.v[k] = op(acc.v[k], x.v[k]);
  }
  return acc;
}
template <class Op>
__device__ __forceinline__ typename Op::value_type reduced_one(
    const PeerArgs<typename Op::value_type>& a, std::size_t e, Op op) {
  typename Op::value_type acc = a.in[0][e];
  for (int r = 1; r < a.meet.ranks; ++r) acc = op(acc, a.in[r][e]);
  return acc;
}

// dst[i] (and dst2[i] unless null) = the reduction of element i, over this thread's
// share of [begin, end).
template <class Op>
__device__ __forceinline__ void reduce_share(const PeerArgs<typename Op::value_type>& a,
                                             typename Op::value_type* dst,
                                             typename Op::value_type* dst2, std::size_t begin,
                                             std::size_t end, Op op) {
  share(
      a.packable, dst, begin, end,
      [&](std::size_t e) {
        const auto acc = reduced_pack(a, e, op);
        store_pack(dst + e, 0, acc);
        if (dst2 != nullptr) store_pack(dst2 + e, 0, acc);
      },
      [&](std::size_t e) {
        const auto acc = reduced_one(a, e, op);
        dst[e] = acc;
        if (dst2 != nullptr) dst2[e] = acc;
      });
}

// out[r][i] = the reduction of element i for every rank r, over this thread's share of
// [begin, end): the direct kernel's shard, into every rank's receive buffer. Each
// element is read from every input before it is written anywhere, so an input may be
// its rank's output.
template <class Op>
__device__ __forceinline__ void reduce_to_all(const PeerArgs<typename Op::value_type>& a,
                                              std::size_t begin, std::size_t end, Op op) {
  const int ranks = a.meet.ranks;
  share(
      a.packable, a.out[a.meet.rank], begin, end,
      [&](std::size_t e) {
        const auto acc = reduced_pack(a, e, op);
        for (int r = 0; r < ranks; ++r) store_pack(a.out[r] + e, 0, acc);
      },
      [&](std::size_t e) {
        const auto acc = reduced_one(a, e, op);
        for (int r = 0; r < ranks; ++r) a.out[r][e] = acc;
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

}  // namespace concord::detail::cuda::peer
