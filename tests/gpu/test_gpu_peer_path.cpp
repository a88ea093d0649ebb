// The device-synchronised path through concord::allreduce and the engine: calls that
// only enqueue (returning before the GPU has done them), CUDA graph capture and replay,
// what cannot be captured, the set-up probe of whether the ranks' kernels run at the
// same time (and the paths taken when they do not), and a peer that arrives too late:
// a failed communicator naming the ranks. Expected values are computed here.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "cuda/cuda_runtime.hpp"
#include "device/device_resources.hpp"
#include "dispatch/device_peer_path.hpp"
#include "gpu/peer_path_support.hpp"
#include "gpu/stream_kernels.hpp"

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace concord;
using namespace concord::test;

TEST_CASE("a device-synchronised allreduce returns before the GPU has done it",
          "[gpu][peer][stream]") {
  Communicator comm = Communicator::world();
  if (!one_node(comm)) return;
  cuda::Stream stream;
  require_peer_path(comm, stream.get());
  constexpr std::size_t n = 4096;
  cuda::DeviceBuffer send(n * sizeof(float));
  cuda::DeviceBuffer recv(n * sizeof(float));
  auto* s = reinterpret_cast<float*>(send.get());
  auto* r = reinterpret_cast<float*>(recv.get());
  std::vector<float> stale = inputs(comm.rank(), n, 0);
  stale[0] = -1000.0f;  // what the result would show if the call read it before the kernel
  upload(s, stale);
  // A kernel still running when the call is made writes the first element...
  delayed_fill(s, 1, value(comm.rank(), 0, 0), 50'000'000, stream.get());
  AllreduceOptions options;
  options.stream = stream.get();
  allreduce(s, r, n, DataType::Float32, ReduceOp::Avg, comm, options);
  // ...and the call has returned with its work still queued behind it.
  CHECK(cudaStreamQuery(stream.get()) == cudaErrorNotReady);
  stream.synchronize();
  CHECK(wrong_sums(download(r, n), comm.size(), 0, 1.0f / static_cast<float>(comm.size())) == 0);
}

TEST_CASE("a device allreduce captured in a CUDA graph replays correctly", "[gpu][peer][graph]") {
  Communicator comm = Communicator::world();
  if (!one_node(comm)) return;
  cuda::Stream stream;
  require_peer_path(comm, stream.get());
  constexpr std::size_t n = 70'001;
  cuda::DeviceBuffer in(n * sizeof(float));
  cuda::DeviceBuffer out(n * sizeof(float));
  cuda::DeviceBuffer other(n * sizeof(float));
  auto* pin = reinterpret_cast<float*>(in.get());
  auto* pout = reinterpret_cast<float*>(out.get());
  auto* pother = reinterpret_cast<float*>(other.get());
  AllreduceOptions options;
  options.stream = stream.get();
  cuda::check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal),
              "cudaStreamBeginCapture");
  allreduce(pin, pout, n, DataType::Float32, ReduceOp::Sum, comm, options);
  cudaGraph_t graph = nullptr;
  cuda::check(cudaStreamEndCapture(stream.get(), &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  cuda::check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  for (int k = 1; k <= 4; ++k) {
    INFO("replay " << k);
    upload(pin, inputs(comm.rank(), n, k));
    cuda::check(cudaGraphLaunch(exec, stream.get()), "cudaGraphLaunch");
    stream.synchronize();
    CHECK(wrong_sums(download(pout, n), comm.size(), k) == 0);
    // A call made the ordinary way between replays: both count their calls on the GPU.
    upload(pother, inputs(comm.rank(), n, 10 + k));
    allreduce(pother, pother, n, DataType::Float32, ReduceOp::Sum, comm, options);
    stream.synchronize();
    CHECK(wrong_sums(download(pother, n), comm.size(), 10 + k) == 0);
  }
  cuda::check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  cuda::check(cudaGraphDestroy(graph), "cudaGraphDestroy");
}

TEST_CASE("calls on one communicator from two streams run in the order they were made",
          "[gpu][peer][stream]") {
  Communicator comm = Communicator::world();
  if (!one_node(comm)) return;
  cuda::Stream first;
  cuda::Stream second;
  require_peer_path(comm, first.get());
  constexpr std::size_t n = 5000;
  constexpr int calls = 6;
  std::vector<cuda::DeviceBuffer> bufs;
  for (int k = 0; k < calls; ++k) {
    bufs.emplace_back(n * sizeof(float));
    upload(reinterpret_cast<float*>(bufs.back().get()), inputs(comm.rank(), n, k));
  }
  // The calls alternate between the streams, the first stream's held back by a slow
  // kernel: the second's calls must still wait for the first's (they share the path's
  // flags and regions), here and on every rank alike.
  delayed_fill(reinterpret_cast<float*>(bufs[0].get()), 1, value(comm.rank(), 0, 0), 50'000'000,
               first.get());
  for (int k = 0; k < calls; ++k) {
    AllreduceOptions options;
    options.stream = (k % 2 == 0 ? first : second).get();
    auto* p = reinterpret_cast<float*>(bufs[k].get());
    allreduce(p, p, n, DataType::Float32, ReduceOp::Sum, comm, options);
  }
  // Waited for in another order on each rank (the emulator runs a stream's work when
  // it is waited for): without the order between the streams the ranks' kernels would
  // pair calls wrongly.
  if (comm.rank() % 2 == 0) {
    second.synchronize();
    first.synchronize();
  } else {
    first.synchronize();
    second.synchronize();
  }
  for (int k = 0; k < calls; ++k) {
    INFO("call " << k);
    CHECK(wrong_sums(download(reinterpret_cast<float*>(bufs[k].get()), n), comm.size(), k) == 0);
  }
}

TEST_CASE("what cannot be captured in a CUDA graph is refused, naming why",
          "[gpu][peer][graph][errors]") {
  Communicator world = Communicator::world();
  if (!one_node(world)) return;
  cuda::Stream stream;
  cuda::DeviceBuffer buf(64 * sizeof(float));
  AllreduceOptions options;
  options.stream = stream.get();
  const auto captured_call_fails = [&](const Communicator& comm, const std::string& why) {
    cuda::check(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal),
                "cudaStreamBeginCapture");
    try {
      allreduce(buf.get(), buf.get(), 64, DataType::Float32, ReduceOp::Sum, comm, options);
      FAIL("captured without an error");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains(why));
    }
    cudaGraph_t graph = nullptr;
    // Refused before anything was queued: the capture itself is still valid.
    CHECK(cudaStreamEndCapture(stream.get(), &graph) == cudaSuccess);
    if (graph != nullptr) cudaGraphDestroy(graph);
  };
  // A communicator's first device call sets it up, which synchronises.
  Communicator fresh(world.mpi_comm());
  captured_call_fails(fresh, "make one before capturing");
  // Paths whose ranks meet on the host synchronise the stream.
  Communicator rounds(world.mpi_comm());
  detail::device_resources(rounds.state()).preference = detail::DevicePathPreference::IpcRounds;
  captured_call_fails(rounds, "only the device-synchronised path can be captured");
}

TEST_CASE("set-up finds whether the ranks' kernels run at the same time, and the paths follow",
          "[gpu][probe]") {
  Communicator world = Communicator::world();
  if (!one_node(world)) return;
  cuda::Stream stream;
  const char* expect = std::getenv("CONCORD_TEST_EXPECT_CONCURRENT");
  // Each communicator probes once. Where the kernels should run at once, a host busy
  // with other work can still make one probe's meetings slow (the emulator's ranks are
  // processes on its cores): at most three communicators are asked, on every rank alike.
  std::optional<Communicator> comm;
  const detail::DevicePeerPath* path = nullptr;
  for (int attempt = 0; attempt < 3; ++attempt) {
    comm.emplace(world.mpi_comm());
    path = peer_path(*comm, stream.get());
    REQUIRE(path != nullptr);
    if (expect == nullptr || std::string(expect) != "1" || path->concurrent) break;
  }
  INFO("probe: mean meeting " << path->probe_meeting_ns << " ns; concurrent " << path->concurrent);
  if (expect != nullptr) CHECK(path->concurrent == (std::string(expect) == "1"));
  // Either way every size is right: small messages staged through host memory and
  // large ones over the IPC rounds where the kernels take turns, else the path.
  AllreduceOptions options;
  options.stream = stream.get();
  for (std::size_t n : {std::size_t{1000}, std::size_t{3} << 20 >> 2}) {  // 4 KB and 3 MiB
    INFO(n << " floats");
    cuda::DeviceBuffer buf(n * sizeof(float));
    auto* p = reinterpret_cast<float*>(buf.get());
    upload(p, inputs(comm->rank(), n, 5));
    allreduce(p, p, n, DataType::Float32, ReduceOp::Sum, *comm, options);
    stream.synchronize();
    CHECK(wrong_sums(download(p, n), comm->size(), 5) == 0);
  }
}

// Run with a short bound (CONCORD_TRANSPORT_TIMEOUT_S=0.5) by gpu_np3_peer_timeout: the last
// rank's call starts long after the others' waits have run out.
TEST_CASE("a peer that never arrives fails the communicator, naming it", "[.][gpu][timeout]") {
  Communicator comm(MPI_COMM_WORLD);  // its own: a failed communicator stays failed
  REQUIRE(one_node(comm));
  cuda::Stream stream;
  require_peer_path(comm, stream.get());
  const int late = comm.size() - 1;
  const bool is_late = comm.rank() == late;
  constexpr std::size_t n = 1000;
  constexpr unsigned long long kDelay = 3'000'000'000ull;  // clock64 counts: seconds
  cuda::DeviceBuffer buf(n * sizeof(float));
  auto* p = reinterpret_cast<float*>(buf.get());
  AllreduceOptions options;
  options.stream = stream.get();
  // How long the late rank's delay takes alone, to tell it from waits that follow it.
  double delay_s = 0;
  if (is_late) {
    const double t0 = MPI_Wtime();
    delayed_fill(p, n, 1.0f, kDelay, stream.get());
    stream.synchronize();
    delay_s = MPI_Wtime() - t0;
    delayed_fill(p, n, 1.0f, kDelay, stream.get());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  // Queued: no error yet. The late rank queues more calls behind the one it is late for.
  for (int k = 0; k < (is_late ? 4 : 1); ++k) {
    allreduce(p, p, n, DataType::Float32, ReduceOp::Sum, comm, options);
  }
  stream.synchronize();
  const double waited_s = MPI_Wtime() - t0 - delay_s;
  if (is_late) {
    // Its kernels found that a peer had given up and ended at once, not each after a
    // bound of its own (0.5 s: four calls would take 2 s).
    INFO("waited " << waited_s << " s beyond the delay");
    CHECK(waited_s < 0.45);
  }
  for (int attempt = 0; attempt < 2; ++attempt) {  // and it stays failed
    INFO("attempt " << attempt);
    try {
      allreduce(p, p, n, DataType::Float32, ReduceOp::Sum, comm, options);
      FAIL("the next call did not fail");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Timeout);
      if (is_late) {
        CHECK_THAT(e.what(), Catch::Contains("abandoned: rank ") &&
                                 Catch::Contains(" had given up waiting for its peers"));
      } else {
        CHECK_THAT(e.what(),
                   Catch::Contains("rank(s) " + std::to_string(late) + " did not arrive"));
      }
      CHECK_THAT(e.what(), Catch::Contains("the communicator has failed"));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("an engine handle fails when its bucket's peer never arrives", "[.][gpu][timeout]") {
  Communicator comm(MPI_COMM_WORLD);  // its own: a failed communicator stays failed
  REQUIRE(one_node(comm));
  Engine engine(comm);
  cuda::Stream stream;
  constexpr std::size_t n = 1000;
  cuda::DeviceBuffer buf(n * sizeof(float));
  auto* p = reinterpret_cast<float*>(buf.get());
  TensorView view{p, n, DataType::Float32, Device::Cuda, stream.get()};
  engine.enqueue_allreduce("warm", view, ReduceOp::Sum).wait();  // the path's set-up
  const bool is_late = comm.rank() == comm.size() - 1;
  if (is_late) delayed_fill(p, n, 1.0f, 3'000'000'000ull, stream.get());
  Handle h = engine.enqueue_allreduce("late", view, ReduceOp::Sum);
  try {
    h.wait();
    FAIL("the handle completed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK_THAT(e.what(), Catch::Contains("the communicator has failed"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  try {
    engine.shutdown();
  } catch (const Error&) {
    // The engine has failed with its communicator; shutting it down may say so again.
  }
}
