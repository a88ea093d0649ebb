// The allreduce correctness matrix on device buffers, stream ordering, the engine
// on device tensors, and argument errors. Ranks may share one GPU.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "cuda/cuda_runtime.hpp"
#include "gpu/stream_kernels.hpp"
#include "mpi/engine_support.hpp"
#include "mpi/test_support.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace concord;
using namespace concord::test;
namespace cuda = concord::detail::cuda;

std::vector<std::size_t> counts_for(int ranks) {
  std::vector<std::size_t> counts{0, 1, 2, 3, 7, 1023, 65537};
  if (ranks <= 4) counts.push_back((std::size_t{1} << 20) + 3);
  return counts;
}

// cudaMemcpy from pageable memory and cudaMemset return before the device has the
// data (both queue on the legacy stream, which the non-blocking streams under test
// do not wait for): every upload ends with a device synchronisation.
void settle() {
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}
void to_device(void* dst, const std::vector<std::byte>& src) {
  cuda::check(cudaMemcpy(dst, src.data(), src.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  settle();
}
std::vector<std::byte> to_host(const void* src, std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  cuda::check(cudaMemcpy(out.data(), src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

}  // namespace

TEST_CASE("device allreduce matches a serial reference for every dtype, op and count",
          "[gpu][matrix]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int ranks = comm.size();
  cuda::Stream stream;
  for (DataType dtype : all_dtypes()) {
    const std::size_t esize = size_of(dtype);
    for (ReduceOp op : all_ops()) {
      if (!is_supported(dtype, op)) continue;
      for (std::size_t count : counts_for(ranks)) {
        if (!case_wanted(dtype, op, count)) continue;
        const ReferenceCase ref(rank, ranks, count, dtype, op);
        cuda::DeviceBuffer send(count * esize + 1);
        cuda::DeviceBuffer recv(count * esize + 1);
        for (bool in_place : {false, true}) {
          for (bool on_stream : {false, true}) {
            INFO("ranks=" << ranks << " dtype=" << to_string(dtype) << " op=" << to_string(op)
                          << " count=" << count << " in_place=" << in_place
                          << " stream=" << on_stream);
            to_device(send.get(), ref.input);
            cuda::check(cudaMemset(recv.get(), 0x5a, count * esize + 1), "cudaMemset");
            settle();
            AllreduceOptions options;  // device left unset: found through the pointer cache
            if (on_stream) options.stream = stream.get();
            void* out = in_place ? send.get() : recv.get();
            allreduce(send.get(), out, count, dtype, op, comm, options);
            // The call may return before the GPU has done it (as NCCL's): the result is
            // there for work ordered after it on its stream. to_host reads on the legacy
            // stream, which a non-blocking stream does not order.
            if (on_stream) stream.synchronize();
            const std::vector<std::byte> got = to_host(out, count * esize);
            if (!in_place) CHECK(to_host(send.get(), count * esize) == ref.input);
            CHECK(ref.mismatch(got) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("device allreduce is ordered on the caller's stream", "[gpu][stream]") {
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  constexpr std::size_t n = 1 << 16;
  cuda::Stream stream;
  cuda::DeviceBuffer send(n * sizeof(float));
  cuda::DeviceBuffer recv(n * sizeof(float));
  cuda::DeviceBuffer seen(n * sizeof(float));
  auto* s = reinterpret_cast<float*>(send.get());
  auto* r = reinterpret_cast<float*>(recv.get());
  auto* v = reinterpret_cast<float*>(seen.get());
  for (int step = 1; step <= 3; ++step) {
    cuda::check(cudaMemset(send.get(), 0, n * sizeof(float)), "cudaMemset");
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    // The input is written by a kernel still running when allreduce is called...
    delayed_fill(s, n, static_cast<float>(comm.rank() + step), 20'000'000, stream.get());
    AllreduceOptions options;
    options.stream = stream.get();
    allreduce(s, r, n, DataType::Float32, ReduceOp::Sum, comm, options);
    // ...and the output is read by a kernel queued right after it returns.
    copy_floats(v, r, n, stream.get());
    stream.synchronize();
    std::vector<float> got(n);
    cuda::check(cudaMemcpy(got.data(), v, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    const float expected = static_cast<float>(ranks * (ranks - 1) / 2 + ranks * step);
    std::size_t wrong = 0;
    for (float x : got) wrong += x != expected ? 1 : 0;
    INFO("step " << step << ": expected " << expected << ", first value " << got[0]);
    CHECK(wrong == 0);
  }
}

TEST_CASE("the engine fuses device tensors, ordered on their streams", "[gpu][engine]") {
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  EngineOptions engine_options;
  engine_options.cycle_time_ms = 0.5;
  Engine engine(comm, engine_options);
  cuda::Stream stream;
  // Tensors of assorted sizes, fused into buckets; a delayed kernel writes the
  // first one, so the engine must wait for the stream.
  const std::vector<std::size_t> sizes{1, 3, 1000, 65536, 7, 250000};
  std::vector<cuda::DeviceBuffer> tensors;
  std::vector<Handle> handles;
  for (int step = 0; step < 3; ++step) {
    tensors.clear();
    handles.clear();
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      tensors.emplace_back(sizes[t] * sizeof(float));
      std::vector<float> host(sizes[t]);
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        host[i] = static_cast<float>(comm.rank() + 1) * static_cast<float>(i % 7 + t);
      }
      cuda::check(cudaMemcpy(tensors[t].get(), host.data(), host.size() * sizeof(float),
                             cudaMemcpyHostToDevice),
                  "cudaMemcpy");
    }
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    delayed_fill(reinterpret_cast<float*>(tensors[0].get()), sizes[0],
                 static_cast<float>(comm.rank() + 1) * 100.0f, 20'000'000, stream.get());
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      TensorView view{tensors[t].get(), sizes[t], DataType::Float32, Device::Cuda, stream.get()};
      // Avg with a prescale of 2 and a postscale of 0.5: the sum over ranks divided by ranks.
      handles.push_back(
          engine.enqueue_allreduce("grad." + std::to_string(t), view, ReduceOp::Avg, 2.0, 0.5));
    }
    for (Handle& h : handles) h.wait();
    const float rank_sum = static_cast<float>(ranks * (ranks + 1) / 2);
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      std::vector<float> got(sizes[t]);
      cuda::check(cudaMemcpy(got.data(), tensors[t].get(), got.size() * sizeof(float),
                             cudaMemcpyDeviceToHost),
                  "cudaMemcpy");
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < sizes[t]; ++i) {
        const float base = t == 0 ? 100.0f : static_cast<float>(i % 7 + t);
        const float expected = base * rank_sum / static_cast<float>(ranks);
        wrong += std::fabs(got[i] - expected) > 1e-5f * std::fabs(expected) ? 1 : 0;
      }
      INFO("step " << step << " tensor " << t << " (" << sizes[t] << " floats)");
      CHECK(wrong == 0);
    }
  }
  engine.shutdown();
}

TEST_CASE("the engine broadcasts and gathers device tensors", "[gpu][engine]") {
  Communicator comm = Communicator::world();
  Engine engine(comm);
  constexpr std::size_t n = 1000;
  cuda::DeviceBuffer tensor(n * sizeof(std::int32_t));
  std::vector<std::int32_t> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = comm.rank() * 1000 + static_cast<int>(i);
  cuda::check(cudaMemcpy(tensor.get(), host.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  settle();
  TensorView view{tensor.get(), n, DataType::Int32, Device::Cuda, nullptr};
  Handle gathered = engine.enqueue_allgather("rows", view, 10);
  const std::vector<std::byte>& all = gathered.output();
  REQUIRE(all.size() == n * 4 * static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    std::int32_t first = 0;
    std::memcpy(&first, &all[static_cast<std::size_t>(r) * n * 4], 4);
    CHECK(first == r * 1000);
  }
  const int root = comm.size() - 1;
  engine.enqueue_broadcast("weights", view, root).wait();
  cuda::check(cudaMemcpy(host.data(), tensor.get(), n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  CHECK(host[0] == root * 1000);
  CHECK(host[n - 1] == root * 1000 + static_cast<int>(n) - 1);
  engine.shutdown();
}

TEST_CASE("the engine's device broadcast is ordered on the tensor's stream", "[gpu][engine]") {
  Communicator comm = Communicator::world();
  Engine engine(comm);
  constexpr std::size_t n = 1 << 16;
  cuda::Stream stream;
  cuda::DeviceBuffer tensor(n * sizeof(float));
  cuda::DeviceBuffer seen(n * sizeof(float));
  auto* t = reinterpret_cast<float*>(tensor.get());
  const int root = comm.size() - 1;
  // A kernel still running at enqueue writes every rank's tensor: the broadcast
  // must land after it, not under it...
  delayed_fill(t, n, static_cast<float>(comm.rank() + 1), 20'000'000, stream.get());
  TensorView view{t, n, DataType::Float32, Device::Cuda, stream.get()};
  engine.enqueue_broadcast("weights", view, root).wait();
  // ...and be on the device for a reader on the tensor's own (non-blocking)
  // stream as soon as the handle completes.
  copy_floats(reinterpret_cast<float*>(seen.get()), t, n, stream.get());
  stream.synchronize();
  std::vector<float> got(n);
  cuda::check(cudaMemcpy(got.data(), seen.get(), n * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
  std::size_t wrong = 0;
  for (float x : got) wrong += x != static_cast<float>(root + 1) ? 1 : 0;
  INFO("rank " << comm.rank() << ": first value " << got[0] << ", root's " << root + 1);
  CHECK(wrong == 0);
  engine.shutdown();
}

namespace {

// A device tensor of `count` floats, all `value`.
cuda::DeviceBuffer device_floats(std::size_t count, float value) {
  cuda::DeviceBuffer buffer(count * sizeof(float));
  const std::vector<float> host(count, value);
  cuda::check(cudaMemcpy(buffer.get(), host.data(), count * sizeof(float), cudaMemcpyHostToDevice),
              "cudaMemcpy");
  settle();
  return buffer;
}

// How many of the buffer's first `count` floats are not `expected`.
std::size_t wrong_floats(const cuda::DeviceBuffer& buffer, std::size_t count, float expected) {
  std::vector<float> got(count);
  cuda::check(cudaMemcpy(got.data(), buffer.get(), count * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
  std::size_t wrong = 0;
  for (float x : got) wrong += x != expected ? 1 : 0;
  return wrong;
}

}  // namespace

TEST_CASE("the engine completes empty device tensors, alone and fused with others",
          "[gpu][engine]") {
  // An empty tensor has nothing to reduce, and its data may be null (torch's empty
  // CUDA tensors), which the engine accepts. Before, a fused device bucket asked the
  // pointer cache for its first tensor's device: null failed the growth of the
  // fusion buffer (every engine stopped for good), or, on one rank only, the bucket
  // itself (its peers waited in the bucket's allreduce until their deadline).
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  const float sum = static_cast<float>(ranks * (ranks + 1) / 2);
  const float mine = static_cast<float>(comm.rank() + 1);
  EngineOptions options;
  options.cycle_time_ms = 0.5;
  Engine engine(comm, options);
  auto empty = [](void* data) { return TensorView{data, 0, DataType::Float32, Device::Cuda}; };
  auto view = [](cuda::DeviceBuffer& b, std::size_t count) {
    return TensorView{b.get(), count, DataType::Float32, Device::Cuda};
  };
  // First in a bucket whose fusion buffer grows.
  cuda::DeviceBuffer a = device_floats(1024, mine);
  for (Handle& h : engine.enqueue_grouped_allreduce(
           {"empty/0", "full/a"}, {empty(nullptr), view(a, 1024)}, ReduceOp::Sum)) {
    CHECK(failure_of(h) == "");
  }
  CHECK(wrong_floats(a, 1024, sum) == 0);
  // First in a bucket that fits the grown buffer; null on rank 0 only, elsewhere a
  // pointer into device memory, as an empty tensor may have.
  cuda::DeviceBuffer b = device_floats(512, mine);
  void* nowhere = comm.rank() == 0 ? nullptr : a.get();
  for (Handle& h : engine.enqueue_grouped_allreduce(
           {"empty/1", "full/b"}, {empty(nowhere), view(b, 512)}, ReduceOp::Avg)) {
    CHECK(failure_of(h) == "");
  }
  CHECK(wrong_floats(b, 512, sum / static_cast<float>(ranks)) == 0);
  // Alone, and a bucket of empty tensors only.
  Handle alone = engine.enqueue_allreduce("empty/2", empty(nullptr), ReduceOp::Sum);
  CHECK(failure_of(alone) == "");
  for (Handle& h : engine.enqueue_grouped_allreduce(
           {"empty/3", "empty/4"}, {empty(nullptr), empty(nowhere)}, ReduceOp::Max)) {
    CHECK(failure_of(h) == "");
  }
  // The engine goes on.
  float x = 1.0f;
  engine.enqueue_allreduce("host", {&x, 1, DataType::Float32}, ReduceOp::Sum).wait();
  CHECK(x == static_cast<float>(ranks));
  engine.shutdown();
}

TEST_CASE("buffers on another GPU than the current one are refused", "[gpu][errors]") {
  int devices = 0;
  cuda::check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  if (devices < 2) {
    SUCCEED("one GPU: nothing to check");
    return;
  }
  Communicator comm = Communicator::world();
  const int mine = cuda::current_device();
  const int other = (mine + 1) % devices;
  cuda::DeviceBuffer elsewhere;
  {
    cuda::DeviceGuard on(other);
    elsewhere.reserve(64 * sizeof(float));
  }
  // The range may have been this GPU's memory earlier in the run, and the pointer
  // cache cannot see frees (docs/GPU.md): forget what it knew.
  clear_pointer_cache();
  try {
    allreduce(elsewhere.get(), elsewhere.get(), 64, DataType::Float32, ReduceOp::Sum, comm);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("is current on this thread"));
  }
  cuda::DeviceGuard on(other);
  elsewhere = cuda::DeviceBuffer();  // freed on its own device
}

TEST_CASE("host and device buffers cannot meet in one call", "[gpu][errors]") {
  Communicator comm = Communicator::world();
  cuda::DeviceBuffer device(64 * sizeof(float));
  std::vector<float> host(64, 1.0f);
  try {
    allreduce(host.data(), device.get(), 64, DataType::Float32, ReduceOp::Sum, comm);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("send is cpu memory but recv is cuda memory"));
  }
  CHECK(cuda_built());
  CHECK(cuda_available());
}
