// Device calls that cannot finish: a rank that never comes to the first one (its
// peers wait for it in CUDA IPC's set-up, which fails at the transport's deadline),
// Communicator::abort() while a device call waits for a peer, in the set-up or in
// the IPC rounds, and the peer of an aborted rank, which fails instead of waiting
// for ever on it. Hidden: each needs its own deadline and CONCORD_CUDA_PEER=off
// (the IPC rounds meet on the host; the device-synchronised path's kernels are
// bounded by the deadline alone), see tests/CMakeLists.txt.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "cuda/cuda_runtime.hpp"
#include "mpi/failing_calls.hpp"

#include <mpi.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace concord;
using Catch::Matchers::Contains;
using concord::test::aborted_while_waiting;
using concord::test::error_of;
using concord::test::own_communicator;
using concord::test::seconds_since;
namespace cuda = concord::detail::cuda;

constexpr std::size_t kCount = 256;

// A device allreduce of kCount floats on `comm`, synchronised: what the caller sees.
void device_allreduce(const Communicator& comm, cuda::DeviceBuffer& buf) {
  allreduce(buf.get(), buf.get(), kCount, DataType::Float32, ReduceOp::Sum, comm);
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

bool one_node(const Communicator& comm) {
  return comm.size() >= 2 && comm.local_size() == comm.size();
}

// What a device allreduce that cannot finish ends with, and after how long.
struct Failure {
  ErrorCode code = ErrorCode::Internal;  // Internal and no message: it did not fail
  std::string message;
  double seconds = 0;
};

// A device allreduce on `comm`, and how it failed.
Failure failing_call(const Communicator& comm, cuda::DeviceBuffer& buf) {
  const auto start = std::chrono::steady_clock::now();
  const auto [code, message] = error_of([&] { device_allreduce(comm, buf); });
  return {code, message, seconds_since(start)};
}

// Runs `body` on a communicator of its own, on a single node of 2 or more ranks
// (a test that fails it must not fail the world's), then meets the other ranks.
void on_own_communicator(const std::function<void(const Communicator&)>& body) {
  MPI_Comm dup = MPI_COMM_NULL;
  {
    Communicator comm = own_communicator(dup);
    if (one_node(comm)) {
      body(comm);
    } else {
      WARN("skipped: needs 2 or more ranks, all on one node");
    }
    MPI_Barrier(MPI_COMM_WORLD);  // ranks that never call wait here
  }
  MPI_Comm_free(&dup);
}

}  // namespace

TEST_CASE("a rank that never comes to the first device call fails its peers at the deadline",
          "[.][gpu][setup_timeout]") {
  on_own_communicator([](const Communicator& comm) {
    cuda::DeviceBuffer buf(kCount * sizeof(float));
    if (comm.rank() == comm.size() - 1) return;  // the late rank never calls
    const Failure failure = failing_call(comm, buf);
    CHECK(failure.code == ErrorCode::Timeout);
    // In the arena's own exchanges: not falling back, to time out again in the
    // agreement after them ("the ranks' agreement on CUDA IPC").
    CHECK_THAT(failure.message, Contains("in CUDA IPC's set-up (MPI_I") && Contains("for 2 s"));
    CHECK(failure.seconds >= 2);
    CHECK(failure.seconds < 20);
    // For good: the next call fails at once with the same error.
    const Failure again = failing_call(comm, buf);
    CHECK(again.code == ErrorCode::Timeout);
    CHECK(again.message == failure.message);
  });
}

TEST_CASE("an abort stops a device call waiting for a peer in CUDA IPC's set-up",
          "[.][gpu][device_abort]") {
  on_own_communicator([](const Communicator& comm) {
    cuda::DeviceBuffer buf(kCount * sizeof(float));
    if (comm.rank() != 0) return;  // the other ranks never call
    // Shutdown within 10 s (the deadline is 60 s), naming the wait.
    const std::string message =
        aborted_while_waiting(comm, 0.3, [&] { device_allreduce(comm, buf); });
    CHECK_THAT(message, Contains("CUDA IPC's set-up"));
    CHECK(failing_call(comm, buf).code == ErrorCode::Shutdown);
  });
}

TEST_CASE("an abort stops a device call in the IPC rounds, and its peer fails instead of waiting",
          "[.][gpu][device_abort]") {
  on_own_communicator([](const Communicator& comm) {
    cuda::DeviceBuffer buf(kCount * sizeof(float));
    std::vector<float> ones(kCount, 1.0f);
    cuda::check(cudaMemcpy(buf.get(), ones.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
                "cudaMemcpy");
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // pageable uploads return early
    device_allreduce(comm, buf);  // sets the IPC rounds up on every rank
    std::vector<float> got(kCount);
    cuda::check(cudaMemcpy(got.data(), buf.get(), kCount * sizeof(float), cudaMemcpyDeviceToHost),
                "cudaMemcpy");
    REQUIRE(got[0] == static_cast<float>(comm.size()));

    if (comm.rank() == 0) {  // the others come only once rank 0 has given up
      const std::string message =
          aborted_while_waiting(comm, 0.3, [&] { device_allreduce(comm, buf); });
      CHECK_THAT(message, Contains("while waiting on the node's local rank"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm.rank() == 0) return;
    // Rank 0 poisoned its counter when its call failed. Whatever it had published
    // still counts (the first call may complete on it); what it had not fails at
    // once instead of waiting for ever, and the communicator has failed.
    Failure failure = failing_call(comm, buf);
    if (failure.message.empty()) failure = failing_call(comm, buf);
    CHECK(failure.code == ErrorCode::Timeout);
    CHECK_THAT(failure.message, Contains("local rank 0 gave up on this communicator"));
    CHECK(failure.seconds < 10);
  });
}
