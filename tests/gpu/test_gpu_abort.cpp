// Device calls that cannot finish: a rank that never comes to the first one (its
// peers wait for it in CUDA IPC's set-up, which fails at the transport's deadline),
// Communicator::abort() while a device call waits for a peer, in the set-up, in the
// IPC rounds or in the device-synchronised path's kernels, and the peer of an
// aborted rank, which fails instead of waiting on it. Hidden: each needs its own
// deadline and CONCORD_CUDA_PEER (off for the IPC rounds, which meet on the host;
// on for the kernels), see tests/gpu/gpu_tests.cmake.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "cuda/cuda_runtime.hpp"
#include "device/device_resources.hpp"
#include "dispatch/device_peer_path.hpp"
#include "gpu/stream_kernels.hpp"
#include "mpi/failing_calls.hpp"

#include <mpi.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace concord;
using Catch::Matchers::Contains;
using concord::test::aborted_while_waiting;
using concord::test::delayed_fill;
using concord::test::error_of;
using concord::test::own_communicator;
using concord::test::seconds_since;
namespace cuda = concord::detail::cuda;

constexpr std::size_t kCount = 256;

// A device allreduce of kCount floats on `comm`, synchronised: what the caller sees.
void device_allreduce(const Communicator& comm, cuda::DeviceBuffer& buf,
                      const AllreduceOptions& options = {}) {
  allreduce(buf.get(), buf.get(), kCount, DataType::Float32, ReduceOp::Sum, comm, options);
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

// One device allreduce of ones on every rank, which sets the call's path up, and
// its sum checked against the rank count.
void sum_ones(const Communicator& comm, cuda::DeviceBuffer& buf,
              const AllreduceOptions& options = {}) {
  std::vector<float> ones(kCount, 1.0f);
  cuda::check(cudaMemcpy(buf.get(), ones.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
              "cudaMemcpy");
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // pageable uploads return early
  device_allreduce(comm, buf, options);
  std::vector<float> got(kCount);
  cuda::check(cudaMemcpy(got.data(), buf.get(), kCount * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
  REQUIRE(got[0] == static_cast<float>(comm.size()));
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
    sum_ones(comm, buf);  // sets the IPC rounds up on every rank

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

// The kernels wait on flags in device memory; the abort reaches them through a word
// in mapped pinned memory that they poll beside their peer's flag.
TEST_CASE("an abort stops a device-synchronised call waiting for a peer, and its peer fails",
          "[.][gpu][peer_abort]") {
  on_own_communicator([](const Communicator& comm) {
    cuda::Stream stream;
    AllreduceOptions options;
    options.stream = stream.get();
    cuda::DeviceBuffer buf(kCount * sizeof(float));
    sum_ones(comm, buf, options);  // sets the path up on every rank
    const auto call = [&] {
      allreduce(buf.get(), buf.get(), kCount, DataType::Float32, ReduceOp::Sum, comm, options);
    };
    const detail::DevicePeerPath* path = comm.state().device_resources->peer.get();
    REQUIRE(path != nullptr);
    REQUIRE(path->concurrent);

    if (comm.rank() == 0) {  // the others come only once rank 0 has aborted
      const auto start = std::chrono::steady_clock::now();
      const std::string message = aborted_while_waiting(comm, 0.3, [&] {
        call();                // queued: its kernel waits for the peers on the GPU
        stream.synchronize();  // until the abort, not the 60 s deadline
        call();
      });
      CHECK(seconds_since(start) < 10);
      // What the kernel recorded: this rank's abort, in the call it abandoned.
      const auto [code, recorded] =
          error_of([&] { detail::check_peer_space(path->space, comm.rank()); });
      CHECK(code == ErrorCode::Shutdown);
      CHECK_THAT(recorded, Contains("aborted the communicator") &&
                               Contains("while device allreduce call 2 waited on rank(s) 1"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm.rank() == 0) return;
    // Rank 0's kernel told every rank that it gave up: this call's kernel ends at
    // once, and the next call says why.
    const auto start = std::chrono::steady_clock::now();
    call();
    stream.synchronize();
    const Failure failure = failing_call(comm, buf);
    CHECK(failure.code == ErrorCode::Timeout);
    CHECK_THAT(failure.message, Contains("device allreduce call 2 on this communicator: rank 0 "
                                         "aborted the communicator") &&
                                    Contains("the communicator has failed"));
    CHECK(seconds_since(start) < 10);
  });
}

// The same through the engine, as torch's ProcessGroup.abort does it: the bucket's
// kernel on rank 0 waits for rank 1, whose tensor becomes ready only 5 s later (a
// delay on its stream); Engine::abort ends that wait after 1 s (by then the bucket's
// negotiation, which the delay does not hold up, is long done), and rank 1's kernel,
// when it runs, finds that rank 0 gave up.
TEST_CASE("an engine abort stops a device bucket waiting in the kernels, and its peer fails",
          "[.][gpu][peer_abort]") {
  on_own_communicator([](const Communicator& comm) {
    EngineOptions engine_options;
    engine_options.stall_warning_s = 600;  // the wait is on purpose: no warning
    Engine engine(comm, engine_options);
    cuda::Stream stream;
    cuda::DeviceBuffer buf(kCount * sizeof(float));
    auto* data = reinterpret_cast<float*>(buf.get());
    const TensorView view{data, kCount, DataType::Float32, Device::Cuda, stream.get()};
    engine.enqueue_allreduce("warm", view, ReduceOp::Sum).wait();  // the path's set-up
    if (comm.rank() == 1) delayed_fill(data, kCount, 1.0f, 5'000'000'000ull, stream.get());
    Handle handle = engine.enqueue_allreduce("late", view, ReduceOp::Sum);
    const auto start = std::chrono::steady_clock::now();
    std::thread aborter;
    if (comm.rank() == 0) {
      aborter = std::thread([&engine] {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        engine.abort();
      });
    }
    const auto [code, message] = error_of([&] { handle.wait(); });
    if (aborter.joinable()) aborter.join();
    const double waited = seconds_since(start);
    CHECK(waited < 15);  // the deadline is 60 s
    if (comm.rank() == 0) {
      // The kernel's wait ended: the engine's data communicator's abort, in that call.
      CHECK(code == ErrorCode::Shutdown);
      CHECK_THAT(message, Contains("this rank aborted the communicator") &&
                              Contains("while device allreduce call 2 waited on rank(s) 1"));
      CHECK(waited >= 1);
    } else {
      CHECK(code == ErrorCode::Timeout);
      CHECK_THAT(message, Contains("rank 0 aborted the communicator"));
      // Rank 0's engine has stopped: this one's negotiation would wait on it until
      // the deadline, unless it aborts too (as in test_engine_abort.cpp).
      engine.abort();
    }
    try {
      engine.shutdown();
    } catch (const Error&) {
      // An engine that failed with its communicator may say so again here.
    }
    CHECK(seconds_since(start) < 15);
  });
}
