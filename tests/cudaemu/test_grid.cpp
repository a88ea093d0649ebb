// The emulator's grid scheduler (grid.hpp) on 2 ranks: __syncthreads is a barrier of
// the block, a grid's blocks are under way together, and a kernel can poll a flag
// that a kernel of the peer process sets through CUDA IPC. Each expectation is a
// value the kernel computes only when the synchronisation held; a wait is bounded by
// clock64, so a broken scheduler fails the check instead of hanging.
#include "cudaemu/kernel.hpp"  // first: kernels in this file are host-compiled

#include <catch2/catch.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr long long kWaitNs = 10'000'000'000;  // 10 s: only a broken wait takes this long

void ok(cudaError_t rc) {
  REQUIRE(rc == cudaSuccess);
}

template <class T>
struct DeviceArray {
  explicit DeviceArray(std::size_t n) : count(n) { ok(cudaMalloc(&p, n * sizeof(T))); }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> read() const {
    std::vector<T> host(count);
    ok(cudaMemcpy(host.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  T* p = nullptr;
  std::size_t count;
};

// Each round, every thread stores its value in its block's slots, and after a
// barrier takes its right-hand neighbour's: after `rounds`, thread t of block b holds
// b * n + (t + rounds) % n. Without a barrier a thread reads a slot not yet written
// (fresh device memory is 0xCD bytes) or already overwritten by the next round.
__global__ void rotate_through_barriers(int* slots, int* out, int rounds) {
  const unsigned n = blockDim.x;
  const unsigned t = threadIdx.x;
  int* mine = slots + static_cast<std::size_t>(blockIdx.x) * n;
  int value = static_cast<int>(blockIdx.x * n + t);
  for (int r = 0; r < rounds; ++r) {
    mine[t] = value;
    __syncthreads();
    value = mine[(t + 1) % n];
    __syncthreads();
  }
  out[blockIdx.x * n + t] = value;
}

// Odd threads exit first; the even ones still meet at the barrier.
__global__ void barrier_after_exits(int* slots, int* out) {
  const unsigned n = blockDim.x;
  const unsigned t = threadIdx.x;
  if (t % 2 == 1) return;
  slots[t] = static_cast<int>(t);
  __syncthreads();
  out[t] = slots[(t + 2) % n];
}

// Polls `flag` until it reaches `expected`: 1 when it did, -1 after kWaitNs. At
// least, not equal: a flag carries a sequence number, and a fast peer may have gone
// on to its next call before this thread looks.
__device__ int wait_for(const volatile int* flag, int expected, long long bound_ns = kWaitNs) {
  const long long start = clock64();
  while (*flag < expected) {
    if (clock64() - start > bound_ns) return -1;
    __nanosleep(100);
  }
  return 1;
}

// Block 0 waits for a flag that only the grid's last block sets: run one block after
// another, block 0 would wait for ever (here: time out).
__global__ void first_block_waits_for_last(volatile int* flag, int* out) {
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) {
    __threadfence();
    *flag = 1;
  }
  if (blockIdx.x == 0) out[threadIdx.x] = wait_for(flag, 1);
}

// Block 1 writes `slot` at its start; block 0 reads it after a barrier of its own,
// without waiting for block 1: on the emulator block 0 runs ahead and reads it unset.
__global__ void read_what_a_later_block_writes(volatile int* slot, int* out) {
  if (blockIdx.x == 1) *slot = 1;
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = *slot;
}

// A rank's side of a meeting with its peer, block by block: block b sets its flag
// (mine[b]) to `sequence`, then waits for the peer's block b to set peer[b].
__global__ void meet_peer(volatile int* mine, const volatile int* peer, int sequence, int* out,
                          long long bound_ns) {
  if (threadIdx.x != 0) return;
  __threadfence_system();
  mine[blockIdx.x] = sequence;
  out[blockIdx.x] = wait_for(peer + blockIdx.x, sequence, bound_ns);
}

// Each rank's flags in device memory, and its peer's as mapped here.
struct PeerFlags {
  explicit PeerFlags(unsigned blocks) : flags(blocks) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ok(cudaMemset(flags.p, 0, blocks * sizeof(int)));
    ok(cudaDeviceSynchronize());
    cudaIpcMemHandle_t handle{};
    cudaIpcMemHandle_t peer_handle{};
    ok(cudaIpcGetMemHandle(&handle, flags.p));
    MPI_Sendrecv(&handle, sizeof handle, MPI_BYTE, 1 - rank, 0, &peer_handle, sizeof peer_handle,
                 MPI_BYTE, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    ok(cudaIpcOpenMemHandle(&peer, peer_handle, cudaIpcMemLazyEnablePeerAccess));
  }
  ~PeerFlags() {
    MPI_Barrier(MPI_COMM_WORLD);
    cudaIpcCloseMemHandle(peer);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  PeerFlags(const PeerFlags&) = delete;
  PeerFlags& operator=(const PeerFlags&) = delete;
  DeviceArray<int> flags;
  void* peer = nullptr;
};

}  // namespace

TEST_CASE("__syncthreads is a barrier of the block, round after round", "[cudaemu][grid]") {
  constexpr unsigned blocks = 3;
  constexpr unsigned threads = 256;
  constexpr int rounds = 4;
  DeviceArray<int> slots(blocks * threads);
  DeviceArray<int> out(blocks * threads);
  CONCORD_CUDAEMU_LAUNCH(blocks, threads, nullptr, rotate_through_barriers)(slots.p, out.p, rounds);
  ok(cudaGetLastError());
  ok(cudaDeviceSynchronize());
  const std::vector<int> got = out.read();
  std::size_t wrong = 0;
  for (unsigned b = 0; b < blocks; ++b) {
    for (unsigned t = 0; t < threads; ++t) {
      wrong += got[b * threads + t] != static_cast<int>(b * threads + (t + rounds) % threads);
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("threads that exited do not hold up a barrier", "[cudaemu][grid]") {
  constexpr unsigned threads = 64;
  DeviceArray<int> slots(threads);
  DeviceArray<int> out(threads);
  ok(cudaMemset(out.p, 0, threads * sizeof(int)));
  CONCORD_CUDAEMU_LAUNCH(1, threads, nullptr, barrier_after_exits)(slots.p, out.p);
  ok(cudaDeviceSynchronize());
  const std::vector<int> got = out.read();
  for (unsigned t = 0; t < threads; t += 2) {
    INFO("thread " << t);
    CHECK(got[t] == static_cast<int>((t + 2) % threads));
    CHECK(got[t + 1] == 0);
  }
}

TEST_CASE("a grid's blocks are under way together", "[cudaemu][grid]") {
  constexpr unsigned blocks = 16;  // what grid_blocks gives the emulated GPU's 2 SMs
  constexpr unsigned threads = 32;
  DeviceArray<int> flag(1);
  DeviceArray<int> out(threads);
  ok(cudaMemset(flag.p, 0, sizeof(int)));
  CONCORD_CUDAEMU_LAUNCH(blocks, threads, nullptr, first_block_waits_for_last)(flag.p, out.p);
  ok(cudaDeviceSynchronize());
  CHECK(out.read() == std::vector<int>(threads, 1));
}

TEST_CASE("a block runs ahead of the blocks after it", "[cudaemu][grid]") {
  DeviceArray<int> slot(1);
  DeviceArray<int> out(1);
  ok(cudaMemset(slot.p, 0, sizeof(int)));
  ok(cudaMemset(out.p, 0xff, sizeof(int)));
  CONCORD_CUDAEMU_LAUNCH(2, 32, nullptr, read_what_a_later_block_writes)(slot.p, out.p);
  ok(cudaDeviceSynchronize());
  CHECK(out.read()[0] == 0);  // what a kernel missing a wait between blocks gets here
  CHECK(slot.read()[0] == 1);
}

TEST_CASE("kernels of two processes meet through flags in each other's memory", "[cudaemu][grid]") {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  REQUIRE(size == 2);
  constexpr unsigned blocks = 4;
  PeerFlags flags(blocks);
  DeviceArray<int> out(blocks);
  // Three calls in a row, each with the next sequence number: a flag left from the
  // last call never satisfies the next one.
  for (int sequence = 1; sequence <= 3; ++sequence) {
    INFO("sequence " << sequence);
    ok(cudaMemset(out.p, 0, blocks * sizeof(int)));
    CONCORD_CUDAEMU_LAUNCH(blocks, 32, nullptr, meet_peer)
    (flags.flags.p, static_cast<const int*>(flags.peer), sequence, out.p, kWaitNs);
    ok(cudaDeviceSynchronize());
    CHECK(out.read() == std::vector<int>(blocks, 1));
  }
}

// Run by cudaemu_np2_no_mps (CUDAEMU_MPS=0): the two processes share the emulated GPU
// without MPS, so their kernels run one after the other. The first to run waits for
// the other in vain; the second finds the first's flag already set.
TEST_CASE("without MPS, kernels of two processes on one GPU run one at a time",
          "[.][cudaemu][no_mps]") {
  const char* mps = std::getenv("CUDAEMU_MPS");
  REQUIRE(mps != nullptr);
  REQUIRE(std::string(mps) == "0");
  PeerFlags flags(1);
  DeviceArray<int> out(1);
  MPI_Barrier(MPI_COMM_WORLD);
  CONCORD_CUDAEMU_LAUNCH(1, 32, nullptr, meet_peer)
  (flags.flags.p, static_cast<const int*>(flags.peer), 1, out.p, 300'000'000);
  ok(cudaDeviceSynchronize());
  const int mine = out.read()[0];
  int lowest = 0;
  int highest = 0;
  MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &highest, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lowest == -1);  // one kernel ran alone and timed out
  CHECK(highest == 1);  // the other, run after it, found its flag
}
