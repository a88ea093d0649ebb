// The engine's device fusion buffer when one rank alone cannot allocate it: the
// ranks agree on it before any bucket runs, and every rank's engine stops at once
// with an error that says so. Before, that rank failed its bucket alone and its
// peers waited in the bucket's allreduce until their deadline.
//
// Hidden, and run on the CUDA emulator only (tests/gpu/gpu_tests.cmake): its GPU has
// the memory CUDAEMU_DEVICE_MEMORY_BYTES gives each process, so the last rank can
// fill its own without starving its peers, which on a real GPU share the memory.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "cuda/cuda_runtime.hpp"
#include "mpi/engine_support.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace concord;
using concord::test::failure_of;
using concord::test::failure_of_submission;
using concord::test::seconds_since;
namespace cuda = concord::detail::cuda;

constexpr std::size_t kMiB = std::size_t{1} << 20;

// A device tensor of `count` floats, all `value`.
cuda::DeviceBuffer filled(std::size_t count, float value) {
  cuda::DeviceBuffer buffer(count * sizeof(float));
  const std::vector<float> host(count, value);
  cuda::check(cudaMemcpy(buffer.get(), host.data(), count * sizeof(float), cudaMemcpyHostToDevice),
              "cudaMemcpy");
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return buffer;
}

float first_value(const cuda::DeviceBuffer& buffer) {
  float value = 0;
  cuda::check(cudaMemcpy(&value, buffer.get(), sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
  return value;
}

std::vector<Handle> enqueue_pair(Engine& engine, const std::string& name, cuda::DeviceBuffer& a,
                                 cuda::DeviceBuffer& b, std::size_t count) {
  return engine.enqueue_grouped_allreduce(
      {name + ".a", name + ".b"},
      {TensorView{a.get(), count, DataType::Float32, Device::Cuda, nullptr},
       TensorView{b.get(), count, DataType::Float32, Device::Cuda, nullptr}},
      ReduceOp::Sum);
}

}  // namespace

TEST_CASE("a device fusion buffer one rank cannot allocate stops the engine on every rank at once",
          "[.][device_fusion_buffer]") {
  Communicator comm = Communicator::world();
  if (comm.size() < 2 || std::getenv("CUDAEMU_DEVICE_MEMORY_BYTES") == nullptr) {
    WARN("skipped: needs two ranks on the CUDA emulator with CUDAEMU_DEVICE_MEMORY_BYTES");
    return;
  }
  const bool limited = comm.rank() == comm.size() - 1;
  Engine engine(comm, concord::test::quick());
  // A small fused bucket first: the device path's own memory and the engine's
  // device state exist after it.
  cuda::DeviceBuffer warm_a = filled(16, 1.0f), warm_b = filled(16, 1.0f);
  for (Handle& h : enqueue_pair(engine, "warm", warm_a, warm_b, 16)) h.wait();
  CHECK(first_value(warm_a) == static_cast<float>(comm.size()));

  // Two 4 MiB tensors: one bucket, an 8 MiB fusion buffer. The last rank leaves
  // itself 4 MiB of device memory.
  const std::size_t count = kMiB;
  cuda::DeviceBuffer big_a = filled(count, 1.0f), big_b = filled(count, 1.0f);
  std::optional<cuda::DeviceBuffer> ballast;
  if (limited) {
    std::size_t free = 0, total = 0;
    cuda::check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    REQUIRE(free > 8 * kMiB);
    ballast.emplace(free - 4 * kMiB);
  }
  std::vector<std::string> failures;
  const auto start = std::chrono::steady_clock::now();
  for (Handle& h : enqueue_pair(engine, "big", big_a, big_b, count)) {
    failures.push_back(failure_of(h));
  }
  const double waited = seconds_since(start);
  INFO("rank " << comm.rank() << ", " << waited << " s");
  for (const std::string& failure : failures) {
    INFO(failure);
    if (limited) {
      CHECK_THAT(failure, Catch::Matchers::Contains("device fusion buffer of 8388608 bytes") &&
                              Catch::Matchers::Contains("cudaErrorMemoryAllocation"));
    } else {
      CHECK_THAT(failure,
                 Catch::Matchers::Contains("another rank could not allocate a fusion buffer"));
    }
  }
  CHECK(waited < 4);  // the peers' transport deadline is 5 s: they did not wait for it
  // The engine stopped for good, and says why: a later submission fails, at once
  // or (if the engine thread has not yet stopped) through its handle.
  const std::string later_failure = failure_of_submission(
      [&] { return enqueue_pair(engine, "later", warm_a, warm_b, 16).front(); });
  CHECK_THAT(later_failure, Catch::Matchers::Contains("fusion buffer"));
}
