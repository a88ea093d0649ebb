// The device-synchronised path when something goes wrong on one rank, run by
// gpu_np2_peer_failures (CONCORD_CUDA_PEER=on, a 1 s bound, 1 MiB regions; one shot to
// 64 KiB, two shot to 4 MiB, the direct kernel from there: tuning_peer_failures.json):
// a peer late for the host meeting of a direct call, a recorded timeout that must fail
// the communicator for a later host call too, an error the application left behind,
// and flags that must not fall behind the calls. Expected values are computed here.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "cuda/cuda_runtime.hpp"
#include "dispatch/device_peer_path.hpp"
#include "gpu/peer_path_support.hpp"
#include "gpu/stream_kernels.hpp"
#include "reduce/cuda_peer_kernels.hpp"

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace concord;
using namespace concord::test;

namespace {

constexpr double kBoundS = 1.0;  // CONCORD_TRANSPORT_TIMEOUT_S of gpu_np2_peer_failures

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// What every case here starts from: a communicator of its own (a failed one stays
// failed), on the device-synchronised path, and options for calls on its stream.
struct OnPeerPath {
  Communicator comm{MPI_COMM_WORLD};
  cuda::Stream stream;
  AllreduceOptions options;
  OnPeerPath() {
    REQUIRE(one_node(comm));
    require_peer_path(comm, stream.get());
    options.stream = stream.get();
  }
};

// The call fails with Timeout, its message containing `text`.
template <typename Call>
void expect_timeout(Call&& call, const std::string& text) {
  try {
    call();
    FAIL("the call did not fail");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK_THAT(e.what(), Catch::Contains(text));
  }
}

}  // namespace

TEST_CASE("a peer late for a direct call's exchange of buffers fails the call at the bound",
          "[.][peer_failure]") {
  OnPeerPath setup;
  auto& [comm, stream, options] = setup;
  const int late = comm.size() - 1;
  constexpr std::size_t n = std::size_t{1} << 20;  // 4 MiB: the direct kernel
  cuda::DeviceBuffer buf(n * sizeof(float));
  auto* p = reinterpret_cast<float*>(buf.get());
  upload(p, inputs(comm.rank(), n, 0));
  MPI_Barrier(MPI_COMM_WORLD);
  if (comm.rank() == late) std::this_thread::sleep_for(std::chrono::seconds(3));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    allreduce(p, p, n, DataType::Float32, ReduceOp::Sum, comm, options);
    stream.synchronize();
    // Where this rank got past the host meeting, its kernels' wait ran out.
    allreduce(p, p, 1, DataType::Float32, ReduceOp::Sum, comm, options);
    FAIL("no call failed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK_THAT(e.what(), Catch::Contains("the communicator has failed"));
    if (comm.rank() != late) {
      CHECK_THAT(e.what(), Catch::Contains("rank(s) " + std::to_string(late) +
                                           " did not arrive at the exchange of its buffers"));
    }
  }
  const double waited = seconds_since(t0);
  INFO("failed after " << waited << " s");
  CHECK(waited < kBoundS + 2.0);  // before the fix: until the late rank came, 3 s
  // Failed for good: a host call fails at once, not in the shared-memory rounds.
  float h = 1.0f;
  expect_timeout([&] { allreduce(&h, &h, 1, DataType::Float32, ReduceOp::Sum, comm); },
                 "communicator has failed");
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a device call's recorded timeout fails the communicator for host calls too",
          "[.][peer_failure]") {
  OnPeerPath setup;
  auto& [comm, stream, options] = setup;
  float warm = 1.0f;  // the host path's shared memory, set up while every rank is here
  allreduce(&warm, &warm, 1, DataType::Float32, ReduceOp::Sum, comm);
  const int late = comm.size() - 1;
  constexpr std::size_t n = 1000;  // one shot
  cuda::DeviceBuffer buf(n * sizeof(float));
  auto* p = reinterpret_cast<float*>(buf.get());
  MPI_Barrier(MPI_COMM_WORLD);
  // The late rank's call waits on its stream behind 3 s of work; the others' kernels
  // give up on it at the bound.
  if (comm.rank() == late) delayed_fill(p, n, 1.0f, 3'000'000'000ull, stream.get());
  allreduce(p, p, n, DataType::Float32, ReduceOp::Sum, comm, options);
  if (comm.rank() != late) stream.synchronize();
  // The late rank's record is still clean: its host call meets the others' shared
  // memory, which they poisoned when their record failed the communicator.
  const auto t0 = std::chrono::steady_clock::now();
  float h = 1.0f;
  expect_timeout([&] { allreduce(&h, &h, 1, DataType::Float32, ReduceOp::Sum, comm); },
                 comm.rank() == late ? "rank" : "did not arrive");
  INFO("the host call failed after " << seconds_since(t0) << " s");
  CHECK(seconds_since(t0) < 10.0);  // before the fix the late rank waited for ever
  CHECK(comm.state().failure.has_value());
  stream.synchronize();
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("an error the application left in CUDA's last error is not the call's",
          "[.][peer_failure]") {
  OnPeerPath setup;
  auto& [comm, stream, options] = setup;
  constexpr std::size_t n = (std::size_t{2} << 20) / sizeof(float);  // two pieces of 1 MiB
  cuda::DeviceBuffer buf(n * sizeof(float));
  auto* p = reinterpret_cast<float*>(buf.get());
  for (int k = 0; k < 2; ++k) {
    INFO("call " << k);
    upload(p, inputs(comm.rank(), n, k));
    if (comm.rank() == 0 && k == 0) {
      void* never = nullptr;  // fails, and the application ignores it
      CHECK(cudaMalloc(&never, std::size_t{1} << 60) != cudaSuccess);
    }
    allreduce(p, p, n, DataType::Float32, ReduceOp::Sum, comm, options);
    stream.synchronize();
    CHECK(wrong_sums(download(p, n), comm.size(), k) == 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// reached() compares sequence numbers modulo 2^32: a flag that fell 2^31 calls behind
// its block's count would read as reached. Only two shot meets on Reduced, so one
// shot and direct calls must pass it on, or a two shot call after 2^31 of them would
// copy its peers' shards before they were reduced.
TEST_CASE("one shot and direct calls keep the Reduced flags in step, across the wrap",
          "[.][peer_failure]") {
  OnPeerPath setup;
  auto& [comm, stream, options] = setup;
  const detail::DevicePeerPath& path = *comm.state().device_resources->peer;
  auto* mine = reinterpret_cast<cuda::PeerFlags*>(path.arena->header(path.arena->rank()));
  const auto flags = [&] {
    cuda::PeerFlags f{};
    cuda::check(cudaMemcpy(&f, mine, sizeof f, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return f;
  };
  constexpr std::size_t two_shot = std::size_t{1} << 18;  // 1 MiB, below the direct kernel
  constexpr std::size_t direct = std::size_t{1} << 20;    // 4 MiB: the direct kernel
  cuda::DeviceBuffer buf(direct * sizeof(float));
  auto* p = reinterpret_cast<float*>(buf.get());
  for (int k = 0; k < 3; ++k) {
    INFO("round " << k);
    upload(p, inputs(comm.rank(), two_shot, k));
    allreduce(p, p, two_shot, DataType::Float32, ReduceOp::Sum, comm, options);
    stream.synchronize();
    CHECK(wrong_sums(download(p, two_shot), comm.size(), k) == 0);
    // One shot and direct calls: every peer's flags of block 0 end on the same call.
    allreduce(p, p, 256, DataType::Float32, ReduceOp::Sum, comm, options);
    allreduce(p, p, direct, DataType::Float32, ReduceOp::Sum, comm, options);
    stream.synchronize();
    MPI_Barrier(MPI_COMM_WORLD);  // the peers' kernels have written this rank's flags
    cuda::PeerFlags f = flags();
    for (int r = 0; r < comm.size(); ++r) {
      INFO("peer " << r);
      CHECK(f.reduced[0][r] == f.left[0][r]);
      CHECK(f.arrived[0][r] == f.calls[0]);
    }
    // Every count moved 16 calls back, through zero in the first round (the counts
    // are small): the sequence numbers of the calls after it wrap past 2^32, and
    // must still meet.
    for (int b = 0; b < cuda::kMaxPeerBlocks; ++b) {
      f.calls[b] -= 16;
      for (int r = 0; r < cuda::kMaxPeerRanks; ++r) {
        f.arrived[b][r] -= 16;
        f.reduced[b][r] -= 16;
        f.left[b][r] -= 16;
      }
    }
    cuda::check(cudaMemcpy(mine, &f, sizeof f, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
