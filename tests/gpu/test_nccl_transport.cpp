// NcclTransport between the GPUs of MPI ranks: exchange patterns the algorithms
// use, checked on the host against values computed here. Exits 77 (skipped) on
// every rank without a CUDA device or NCCL, or with several ranks on one GPU and
// an NCCL older than 2.30.
#include <catch2/catch.hpp>

#include "support/catch_session.hpp"

#include "transport/nccl_library.hpp"
#include "transport/nccl_transport.hpp"

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using concord::detail::NcclComm;
using concord::detail::NcclTransport;
using concord::detail::Request;

namespace {

constexpr int kSkip = 77;

MPI_Comm g_comm = MPI_COMM_NULL;
int g_rank = 0;
int g_size = 1;
NcclComm* g_nccl = nullptr;

void cuda_ok(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) FAIL(what << ": " << cudaGetErrorString(rc));
}

// Device memory and a stream, owned here (the test's own CUDA runtime).
class DeviceInts {
 public:
  explicit DeviceInts(std::size_t count) : count_(count) {
    cuda_ok(cudaMalloc(&ptr_, bytes() == 0 ? 1 : bytes()), "cudaMalloc");
  }
  ~DeviceInts() { cudaFree(ptr_); }
  DeviceInts(const DeviceInts&) = delete;
  DeviceInts& operator=(const DeviceInts&) = delete;

  std::int32_t* get() const { return static_cast<std::int32_t*>(ptr_); }
  std::size_t bytes() const { return count_ * sizeof(std::int32_t); }
  void upload(const std::vector<std::int32_t>& host) {
    cuda_ok(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    // From pageable memory cudaMemcpy may return before the DMA lands, and the
    // transport's non-blocking stream does not wait for the legacy stream.
    cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::vector<std::int32_t> download() const {
    std::vector<std::int32_t> host(count_);
    cuda_ok(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return host;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t count_;
};

class TestStream {
 public:
  TestStream() { cuda_ok(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "stream"); }
  ~TestStream() { cudaStreamDestroy(s_); }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const { cuda_ok(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t s_ = nullptr;
};

// What rank r sends in message `tag`: distinct per rank, message and element.
std::int32_t value(int r, int tag, std::size_t i) {
  const std::int64_t v =
      std::int64_t{r} * 1000003 + std::int64_t{tag} * 7919 + static_cast<std::int64_t>(i % 65521);
  return static_cast<std::int32_t>(v);  // modular: only distinctness matters
}

std::vector<std::int32_t> message(int r, int tag, std::size_t count) {
  std::vector<std::int32_t> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = value(r, tag, i);
  return v;
}

bool holds(const std::vector<std::int32_t>& got, int r, int tag) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != value(r, tag, i)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("ring shift: every rank receives its left neighbour's buffer", "[nccl_transport]") {
  const int right = (g_rank + 1) % g_size;
  const int left = (g_rank - 1 + g_size) % g_size;
  TestStream stream;
  NcclTransport transport(*g_nccl, stream.get());
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, (std::size_t{1} << 20) + 3}) {
    DeviceInts send(count);
    DeviceInts recv(count);
    send.upload(message(g_rank, 1, count));
    transport.sendrecv(right, send.get(), send.bytes(), left, recv.get(), recv.bytes(), 0);
    stream.sync();
    CHECK(holds(recv.download(), left, 1));
  }
}

TEST_CASE("pair exchange: both directions, several messages in order", "[nccl_transport]") {
  const int partner = g_rank ^ 1;
  if (partner >= g_size) return;  // odd rank count: the last rank sits this one out
  TestStream stream;
  NcclTransport transport(*g_nccl, stream.get());
  // Messages to one peer match in the order they were started, empty ones included.
  const std::vector<std::size_t> counts = {1000, 0, 37, 1 << 18};
  std::vector<std::unique_ptr<DeviceInts>> sends;
  std::vector<std::unique_ptr<DeviceInts>> recvs;
  std::vector<Request> requests;
  for (std::size_t m = 0; m < counts.size(); ++m) {
    sends.push_back(std::make_unique<DeviceInts>(counts[m]));
    recvs.push_back(std::make_unique<DeviceInts>(counts[m]));
    sends.back()->upload(message(g_rank, static_cast<int>(m), counts[m]));
  }
  // Receives first on the even rank, sends first on the odd one: the group
  // makes the order irrelevant.
  for (std::size_t m = 0; m < counts.size(); ++m) {
    const int tag = static_cast<int>(m);
    if (g_rank % 2 == 0) {
      requests.push_back(transport.irecv(partner, recvs[m]->get(), recvs[m]->bytes(), tag));
      requests.push_back(transport.isend(partner, sends[m]->get(), sends[m]->bytes(), tag));
    } else {
      requests.push_back(transport.isend(partner, sends[m]->get(), sends[m]->bytes(), tag));
      requests.push_back(transport.irecv(partner, recvs[m]->get(), recvs[m]->bytes(), tag));
    }
  }
  // Waiting on the first request launches them all; the rest are then no-ops.
  for (Request& r : requests) transport.wait(r);
  for (Request& r : requests) CHECK(r.slot == Request::kNone);
  stream.sync();
  for (std::size_t m = 0; m < counts.size(); ++m) {
    CHECK(holds(recvs[m]->download(), partner, static_cast<int>(m)));
  }
}

TEST_CASE("recursive-doubling rounds: exchange at every distance", "[nccl_transport]") {
  TestStream stream;
  NcclTransport transport(*g_nccl, stream.get());
  constexpr std::size_t kCount = 4099;
  DeviceInts send(kCount);
  send.upload(message(g_rank, 2, kCount));
  for (int distance = 1; distance < g_size; distance *= 2) {
    const int partner = g_rank ^ distance;
    if (partner >= g_size) continue;
    DeviceInts recv(kCount);
    transport.sendrecv(partner, send.get(), send.bytes(), partner, recv.get(), recv.bytes(),
                       distance);
    stream.sync();
    CHECK(holds(recv.download(), partner, 2));
  }
}

TEST_CASE("operations still queued are launched when the transport goes", "[nccl_transport]") {
  const int right = (g_rank + 1) % g_size;
  const int left = (g_rank - 1 + g_size) % g_size;
  TestStream stream;
  constexpr std::size_t kCount = 777;
  DeviceInts send(kCount);
  DeviceInts recv(kCount);
  send.upload(message(g_rank, 3, kCount));
  {
    NcclTransport transport(*g_nccl, stream.get());
    transport.irecv(left, recv.get(), recv.bytes(), 0);
    transport.isend(right, send.get(), send.bytes(), 0);
  }
  stream.sync();
  CHECK(holds(recv.download(), left, 3));
}

namespace {

// Every rank computes the same verdict; a non-empty reason means skip.
std::string skip_reason(MPI_Comm comm, const std::string& local_reason) {
  int local_ok = local_reason.empty() ? 1 : 0;
  int all_ok = 0;
  MPI_Allreduce(&local_ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  if (all_ok == 1) return {};
  return local_reason.empty() ? "another rank cannot run it" : local_reason;
}

int finish(int rc) {
  MPI_Finalize();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  MPI_Comm_rank(g_comm, &g_rank);
  MPI_Comm_size(g_comm, &g_size);

  // One GPU per rank on a node, round robin when there are fewer GPUs than ranks.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(g_comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_rank = 0;
  int local_size = 1;
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);

  int devices = 0;
  std::string why;
  if (cudaError_t rc = cudaGetDeviceCount(&devices); rc != cudaSuccess || devices == 0) {
    why = rc != cudaSuccess ? cudaGetErrorString(rc) : "no CUDA device is visible";
    cudaGetLastError();
    devices = 0;
  }
  if (std::string reason = skip_reason(g_comm, why); !reason.empty()) {
    if (g_rank == 0) std::printf("skipped: no CUDA device (%s)\n", reason.c_str());
    return finish(kSkip);
  }
  const bool shared_gpu = local_size > devices;
  // Read by NCCL when it initialises (ncclCommInitRank), so set before that.
  if (shared_gpu) setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);

  const concord::detail::NcclLibrary* lib = concord::detail::try_nccl(&why);
  if (std::string reason = skip_reason(g_comm, lib == nullptr ? why : ""); !reason.empty()) {
    if (g_rank == 0) std::printf("skipped: NCCL unavailable (%s)\n", reason.c_str());
    return finish(kSkip);
  }
  if (shared_gpu && !concord::detail::nccl_supports_multi_rank_gpu(lib->version)) {
    why = "NCCL " + concord::detail::nccl_version_string(lib->version) +
          " runs one rank per GPU; " + std::to_string(local_size) + " ranks share " +
          std::to_string(devices) + " GPU(s) here (needs NCCL 2.30)";
  } else {
    why.clear();
  }
  if (std::string reason = skip_reason(g_comm, why); !reason.empty()) {
    if (g_rank == 0) std::printf("skipped: %s\n", reason.c_str());
    return finish(kSkip);
  }

  const int device = local_rank % devices;
  if (cudaError_t rc = cudaSetDevice(device); rc != cudaSuccess) {
    std::fprintf(stderr, "rank %d: cudaSetDevice(%d): %s\n", g_rank, device,
                 cudaGetErrorString(rc));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  int failures = 0;
  {
    std::unique_ptr<NcclComm> nccl_comm;
    try {
      nccl_comm = std::make_unique<NcclComm>(g_comm, g_rank);
    } catch (const std::exception& e) {
      // A rank that fails alone leaves the others waiting in ncclCommInitRank.
      std::fprintf(stderr, "rank %d: %s\n", g_rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
      return 1;
    }
    if (nccl_comm->device() != device || nccl_comm->rank() != g_rank ||
        nccl_comm->size() != g_size) {
      std::fprintf(stderr, "rank %d: NcclComm on device %d rank %d/%d, expected %d %d/%d\n", g_rank,
                   nccl_comm->device(), nccl_comm->rank(), nccl_comm->size(), device, g_rank,
                   g_size);
      ++failures;
    }
    g_nccl = nccl_comm.get();

    const concord::test::CatchOutcome outcome = concord::test::run_catch(argc, argv);
    if (outcome.command_line_error != 0) MPI_Abort(MPI_COMM_WORLD, outcome.command_line_error);
    failures += outcome.failures;
    g_nccl = nullptr;
  }
  int any_failures = 0;
  MPI_Allreduce(&failures, &any_failures, 1, MPI_INT, MPI_MAX, g_comm);
  MPI_Comm_free(&g_comm);
  return finish(any_failures == 0 ? 0 : 1);
}
