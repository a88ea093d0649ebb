// The CUDA emulator's own semantics, on 2 ranks. The device tests of the
// emulation build mean something only if the emulator defers work the way a GPU
// may, orders streams as CUDA documents, shares memory through IPC and rejects
// what the runtime rejects; each of those is checked here against plain facts
// (bytes written by the test), not against the emulator's own bookkeeping.
#include "cudaemu/kernel.hpp"  // first: kernels in this file are host-compiled

#include <catch2/catch.hpp>

#include "support/catch_session.hpp"

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr std::size_t kBytes = 4096;

void ok(cudaError_t rc) {
  REQUIRE(rc == cudaSuccess);
}

struct Device {
  explicit Device(std::size_t bytes = kBytes) { ok(cudaMalloc(&p, bytes)); }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  std::byte* get() const { return static_cast<std::byte*>(p); }
  void* p = nullptr;
};

struct Pinned {
  Pinned() { ok(cudaMallocHost(&p, kBytes)); }
  ~Pinned() { cudaFreeHost(p); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(p); }
  void* p = nullptr;
};

struct Stream {
  explicit Stream(unsigned flags = cudaStreamNonBlocking) {
    ok(cudaStreamCreateWithFlags(&s, flags));
  }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t s = nullptr;
};

bool all_equal(const unsigned char* p, std::size_t n, unsigned char value) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != value) return false;
  }
  return true;
}

__global__ void write_index(std::uint32_t* out, std::size_t n) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<std::uint32_t>(i);
  }
}

std::vector<std::uint32_t> words_of(const Device& d, std::size_t n) {
  std::vector<std::uint32_t> host(n);
  ok(cudaMemcpy(host.data(), d.get(), n * 4, cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace

TEST_CASE("queued work runs only when something waits for it", "[cudaemu]") {
  Device d;
  Pinned src;
  Pinned dst;
  Stream s;
  std::memset(src.get(), 7, kBytes);
  ok(cudaMemcpyAsync(d.get(), src.get(), kBytes, cudaMemcpyHostToDevice, s.s));
  CHECK(cudaStreamQuery(s.s) == cudaErrorNotReady);
  // The copy has not read its pinned source yet: a later write is what it moves.
  std::memset(src.get(), 9, kBytes);
  ok(cudaMemcpyAsync(dst.get(), d.get(), kBytes, cudaMemcpyDeviceToHost, s.s));
  CHECK(all_equal(dst.get(), kBytes, 0));
  ok(cudaStreamSynchronize(s.s));
  CHECK(cudaStreamQuery(s.s) == cudaSuccess);
  CHECK(all_equal(dst.get(), kBytes, 9));
}

TEST_CASE("fresh device memory is not zero", "[cudaemu]") {
  Device d;
  Pinned out;
  ok(cudaMemcpy(out.get(), d.get(), kBytes, cudaMemcpyDeviceToHost));
  CHECK(all_equal(out.get(), kBytes, 0xCD));
}

TEST_CASE("device addresses are never former host addresses", "[cudaemu]") {
  // As with unified addressing: concord's pointer cache keeps host pages as host.
  constexpr std::size_t big = std::size_t{1} << 22;  // malloc maps this, free unmaps it
  void* host = std::malloc(big);
  REQUIRE(host != nullptr);
  const auto h = reinterpret_cast<std::uintptr_t>(host);
  std::free(host);
  Device d(big);
  const auto p = reinterpret_cast<std::uintptr_t>(d.get());
  CHECK((p + big <= h || p >= h + big));
}

TEST_CASE("a device holds so much memory and no more", "[cudaemu]") {
  std::size_t free_before = 0, total = 0;
  ok(cudaMemGetInfo(&free_before, &total));
  REQUIRE(total > 0);
  REQUIRE(free_before <= total);
  std::size_t free_after = 0;
  {
    const Device taken(kBytes);
    ok(cudaMemGetInfo(&free_after, &total));
    CHECK(free_before - free_after >= kBytes);  // at least what was asked for
  }
  ok(cudaMemGetInfo(&free_after, &total));
  CHECK(free_after == free_before);  // cudaFree gave it back
  // More than the device has left fails as on a full GPU, and says so once.
  void* p = nullptr;
  CHECK(cudaMalloc(&p, free_before + 1) == cudaErrorMemoryAllocation);
  CHECK(p == nullptr);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("the legacy stream orders blocking streams, not non-blocking ones", "[cudaemu]") {
  Device d;
  Pinned out;
  ok(cudaMemset(d.get(), 1, kBytes));  // queued on the legacy stream
  {
    Stream non_blocking;
    ok(cudaMemcpyAsync(out.get(), d.get(), kBytes, cudaMemcpyDeviceToHost, non_blocking.s));
    ok(cudaStreamSynchronize(non_blocking.s));
    CHECK(all_equal(out.get(), kBytes, 0xCD));  // ran before the memset
  }
  {
    Stream blocking(cudaStreamDefault);
    ok(cudaMemcpyAsync(out.get(), d.get(), kBytes, cudaMemcpyDeviceToHost, blocking.s));
    ok(cudaStreamSynchronize(blocking.s));
    CHECK(all_equal(out.get(), kBytes, 1));  // waited for it
  }
}

TEST_CASE("cudaMemcpy from pageable memory returns before the device has the data", "[cudaemu]") {
  Device d;
  Pinned out;
  Stream s;
  std::vector<unsigned char> host(kBytes, 5);
  ok(cudaMemcpy(d.get(), host.data(), kBytes, cudaMemcpyHostToDevice));
  std::fill(host.begin(), host.end(), 6);  // the source was staged: this is not copied
  ok(cudaMemcpyAsync(out.get(), d.get(), kBytes, cudaMemcpyDeviceToHost, s.s));
  ok(cudaStreamSynchronize(s.s));
  CHECK(all_equal(out.get(), kBytes, 0xCD));
  ok(cudaDeviceSynchronize());
  ok(cudaMemcpyAsync(out.get(), d.get(), kBytes, cudaMemcpyDeviceToHost, s.s));
  ok(cudaStreamSynchronize(s.s));
  CHECK(all_equal(out.get(), kBytes, 5));
}

TEST_CASE("an event orders one stream after another", "[cudaemu]") {
  Device d;
  Pinned out;
  Stream first;
  Stream second;
  cudaEvent_t e = nullptr;
  ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ok(cudaMemsetAsync(d.get(), 3, kBytes, first.s));
  ok(cudaEventRecord(e, first.s));
  CHECK(cudaEventQuery(e) == cudaErrorNotReady);
  ok(cudaStreamWaitEvent(second.s, e, 0));
  ok(cudaMemcpyAsync(out.get(), d.get(), kBytes, cudaMemcpyDeviceToHost, second.s));
  ok(cudaStreamSynchronize(second.s));
  CHECK(all_equal(out.get(), kBytes, 3));
  CHECK(cudaEventQuery(e) == cudaSuccess);
  ok(cudaEventDestroy(e));
}

TEST_CASE("copies past an allocation's end are refused", "[cudaemu]") {
  Device d(100);
  std::vector<unsigned char> host(200);
  CHECK(cudaMemcpy(d.get(), host.data(), 101, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);  // read once, then cleared
  CHECK(cudaMemcpy(d.get() + 50, host.data(), 50, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaMemcpy(host.data(), d.get(), 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  cudaGetLastError();  // leave no error for the next test to find
}

TEST_CASE("kernels cover their grid and launch errors reach cudaGetLastError", "[cudaemu]") {
  constexpr std::size_t n = 10'000;
  Device d(n * sizeof(std::uint32_t));
  Stream s;
  auto* out = reinterpret_cast<std::uint32_t*>(d.get());
  CONCORD_CUDAEMU_LAUNCH(3, 128, s.s, write_index)(out, n);  // grid-stride: 384 threads
  ok(cudaGetLastError());
  std::vector<std::uint32_t> host(n);
  ok(cudaStreamSynchronize(s.s));
  ok(cudaMemcpy(host.data(), out, n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += host[i] != i ? 1 : 0;
  CHECK(wrong == 0);
  CONCORD_CUDAEMU_LAUNCH(1, 2048, s.s, write_index)(out, n);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
}

TEST_CASE("IPC handles open in other processes only, at the allocation's base", "[cudaemu]") {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  REQUIRE(size == 2);
  Device mine;
  std::vector<unsigned char> host(kBytes, static_cast<unsigned char>(10 + rank));
  ok(cudaMemcpy(mine.get(), host.data(), kBytes, cudaMemcpyHostToDevice));
  ok(cudaDeviceSynchronize());
  cudaIpcMemHandle_t handle{};
  // Exported from an interior pointer: the handle still names the whole allocation.
  ok(cudaIpcGetMemHandle(&handle, mine.get() + 256));
  void* self = nullptr;
  CHECK(cudaIpcOpenMemHandle(&self, handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess);
  cudaGetLastError();
  cudaIpcMemHandle_t peer_handle{};
  MPI_Sendrecv(&handle, sizeof handle, MPI_BYTE, 1 - rank, 0, &peer_handle, sizeof peer_handle,
               MPI_BYTE, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  void* peer = nullptr;
  ok(cudaIpcOpenMemHandle(&peer, peer_handle, cudaIpcMemLazyEnablePeerAccess));
  std::vector<unsigned char> seen(kBytes);
  ok(cudaMemcpy(seen.data(), peer, kBytes, cudaMemcpyDeviceToHost));
  CHECK(all_equal(seen.data(), kBytes, static_cast<unsigned char>(10 + (1 - rank))));
  // A write through the mapping is the owner's data once the writer's stream ran.
  ok(cudaMemset(static_cast<std::byte*>(peer) + kBytes - 1, 0x77, 1));
  ok(cudaDeviceSynchronize());
  MPI_Barrier(MPI_COMM_WORLD);
  ok(cudaMemcpy(seen.data(), mine.get(), kBytes, cudaMemcpyDeviceToHost));
  CHECK(seen[kBytes - 1] == 0x77);
  MPI_Barrier(MPI_COMM_WORLD);
  ok(cudaIpcCloseMemHandle(peer));
  MPI_Barrier(MPI_COMM_WORLD);
}

__global__ void add_one(std::uint32_t* data, std::size_t n) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    data[i] += 1;
  }
}

TEST_CASE("a captured graph replays its work, with its arguments, launch after launch",
          "[cudaemu]") {
  constexpr std::size_t n = 1000;
  Device a(n * 4);
  Device b(n * 4);
  Stream s;
  auto* pa = reinterpret_cast<std::uint32_t*>(a.get());
  ok(cudaMemset(a.get(), 0, n * 4));
  ok(cudaDeviceSynchronize());
  ok(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus status{};
  ok(cudaStreamIsCapturing(s.s, &status));
  CHECK(status == cudaStreamCaptureStatusActive);
  CONCORD_CUDAEMU_LAUNCH(2, 128, s.s, add_one)(pa, n);
  ok(cudaMemcpyAsync(b.get(), a.get(), n * 4, cudaMemcpyDeviceToDevice, s.s));
  cudaGraph_t graph = nullptr;
  ok(cudaStreamEndCapture(s.s, &graph));
  ok(cudaStreamSynchronize(s.s));
  CHECK(words_of(a, n) == std::vector<std::uint32_t>(n, 0));  // captured, not run
  cudaGraphExec_t exec = nullptr;
  ok(cudaGraphInstantiate(&exec, graph, 0));
  for (std::uint32_t launch = 1; launch <= 3; ++launch) {
    ok(cudaGraphLaunch(exec, s.s));
    ok(cudaStreamSynchronize(s.s));
    CHECK(words_of(b, n) == std::vector<std::uint32_t>(n, launch));
  }
  ok(cudaGraphExecDestroy(exec));
  ok(cudaGraphDestroy(graph));
}

TEST_CASE("what a capture forbids fails and invalidates it", "[cudaemu]") {
  Stream s;
  for (int forbidden = 0; forbidden < 3; ++forbidden) {
    INFO("forbidden call " << forbidden);
    ok(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal));
    void* p = nullptr;
    if (forbidden == 0) CHECK(cudaStreamSynchronize(s.s) == cudaErrorStreamCaptureUnsupported);
    if (forbidden == 1) CHECK(cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported);
    if (forbidden == 2) CHECK(cudaDeviceSynchronize() == cudaErrorStreamCaptureUnsupported);
    cudaGetLastError();
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(s.s, &graph) == cudaErrorStreamCaptureInvalidated);
    CHECK(graph == nullptr);
    cudaGetLastError();
  }
  void* p = nullptr;
  ok(cudaMalloc(&p, 64));  // allowed again once the capture has ended
  ok(cudaFree(p));
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const concord::test::CatchOutcome outcome = concord::test::run_catch(argc, argv);
  int failures = outcome.command_line_error != 0 ? outcome.command_line_error : outcome.failures;
  int any = 0;
  MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any == 0 ? 0 : 1;
}
