// The device-synchronised allreduce kernels (reduce/cuda_peer_kernels.hpp), one shot
// and two shot, at 2 and 3 ranks, on one GPU or two: each rank's input, output, flags
// and timeout record in its own device memory, exchanged through CUDA IPC. The
// expected values are computed here from the inputs' formula: small integers, exact
// in every dtype, folded in rank order; 16-bit floats are encoded and decoded here.
#include "reduce/cuda_peer_kernels.hpp"

#include <concord/error.hpp>
#include <concord/types.hpp>

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

namespace cu = concord::detail::cuda;
using concord::DataType;
using concord::ReduceOp;

constexpr std::uint64_t kPatientNs = 120'000'000'000;  // no correct call waits this long

void ok(cudaError_t rc) {
  REQUIRE(rc == cudaSuccess);
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Device memory of this rank, and every rank's as mapped here through CUDA IPC.
class Shared {
 public:
  explicit Shared(std::size_t bytes) : bytes_(bytes) {
    ok(cudaMalloc(&mine_, bytes));
    ok(cudaMemset(mine_, 0, bytes));
    ok(cudaDeviceSynchronize());
    cudaIpcMemHandle_t handle{};
    ok(cudaIpcGetMemHandle(&handle, mine_));
    std::vector<cudaIpcMemHandle_t> all(world_size());
    MPI_Allgather(&handle, sizeof handle, MPI_BYTE, all.data(), sizeof handle, MPI_BYTE,
                  MPI_COMM_WORLD);
    for (int r = 0; r < world_size(); ++r) {
      void* p = mine_;
      if (r != world_rank()) ok(cudaIpcOpenMemHandle(&p, all[r], cudaIpcMemLazyEnablePeerAccess));
      mapped_.push_back(p);
    }
  }
  ~Shared() {
    MPI_Barrier(MPI_COMM_WORLD);  // no peer still reads this rank's memory
    for (int r = 0; r < static_cast<int>(mapped_.size()); ++r) {
      if (r != world_rank()) cudaIpcCloseMemHandle(mapped_[r]);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    cudaFree(mine_);
  }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  void* mine() const { return mine_; }
  void* of(int rank) const { return mapped_[rank]; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* mine_ = nullptr;
  std::size_t bytes_;
  std::vector<void*> mapped_;
};

// Small non-negative integers as each dtype's bits, and back.
std::uint16_t half_bits(unsigned n) {  // exact for n < 2048
  if (n == 0) return 0;
  int e = 0;
  while ((n >> (e + 1)) != 0) ++e;
  const unsigned mantissa = (n << (10 - e)) & 0x3ffu;
  return static_cast<std::uint16_t>(((e + 15) << 10) | mantissa);
}
double from_half(std::uint16_t b) {
  const int e = (b >> 10) & 0x1f;
  const int m = b & 0x3ff;
  return e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
}
std::uint16_t bfloat_bits(unsigned n) {
  const float f = static_cast<float>(n);
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);  // exact for n < 256
}
double from_bfloat(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t{b} << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

void put(DataType d, std::byte* p, unsigned n) {
  switch (d) {
    case DataType::Int8:
      *reinterpret_cast<std::int8_t*>(p) = static_cast<std::int8_t>(n);
      break;
    case DataType::Int32:
      *reinterpret_cast<std::int32_t*>(p) = static_cast<std::int32_t>(n);
      break;
    case DataType::Float16:
      *reinterpret_cast<std::uint16_t*>(p) = half_bits(n);
      break;
    case DataType::BFloat16:
      *reinterpret_cast<std::uint16_t*>(p) = bfloat_bits(n);
      break;
    case DataType::Float32:
      *reinterpret_cast<float*>(p) = static_cast<float>(n);
      break;
    case DataType::Float64:
      *reinterpret_cast<double*>(p) = n;
      break;
    default:
      FAIL("dtype not in this test");
  }
}
double get(DataType d, const std::byte* p) {
  switch (d) {
    case DataType::Int8:
      return *reinterpret_cast<const std::int8_t*>(p);
    case DataType::Int32:
      return *reinterpret_cast<const std::int32_t*>(p);
    case DataType::Float16:
      return from_half(*reinterpret_cast<const std::uint16_t*>(p));
    case DataType::BFloat16:
      return from_bfloat(*reinterpret_cast<const std::uint16_t*>(p));
    case DataType::Float32:
      return *reinterpret_cast<const float*>(p);
    case DataType::Float64:
      return *reinterpret_cast<const double*>(p);
    default:
      FAIL("dtype not in this test");
  }
  return 0;
}

// Rank r's element i in call `call`: 1..3 (products of up to 3 ranks stay small).
unsigned value(int rank, std::size_t i, int call) {
  return 1 + static_cast<unsigned>((i * 7 + static_cast<std::size_t>(rank) * 5 + call) % 3);
}
double expected(ReduceOp op, std::size_t i, int call, int ranks) {
  double acc = value(0, i, call);
  for (int r = 1; r < ranks; ++r) {
    const double x = value(r, i, call);
    acc = op == ReduceOp::Prod  ? acc * x
          : op == ReduceOp::Min ? std::min(acc, x)
          : op == ReduceOp::Max ? std::max(acc, x)
                                : acc + x;  // Sum; Avg reduces as Sum
  }
  return acc;
}

// One rank's buffers for calls of up to `count` elements of 8 bytes, at `offset` bytes
// into each (unaligned offsets take the kernel's element-by-element head and tail).
struct Call {
  Call(std::size_t count, std::size_t at)
      : inputs(at + count * 8), outputs(at + count * 8), flags(sizeof(cu::PeerFlags)), offset(at) {
    ok(cudaMalloc(&timeout, sizeof(cu::PeerTimeout)));
    ok(cudaMemset(timeout, 0, sizeof(cu::PeerTimeout)));
    ok(cudaDeviceSynchronize());
  }
  ~Call() { cudaFree(timeout); }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  cu::PeerAllreduce describe(std::size_t count, DataType d, ReduceOp op, std::uint32_t seq) {
    cu::PeerAllreduce c;
    c.rank = world_rank();
    c.ranks = world_size();
    c.sequence = seq;
    for (int r = 0; r < c.ranks; ++r) {
      c.flags[r] = static_cast<cu::PeerFlags*>(flags.of(r));
      c.inputs[r] = static_cast<std::byte*>(inputs.of(r)) + offset;
      c.outputs[r] = static_cast<std::byte*>(outputs.of(r)) + offset;
    }
    c.count = count;
    c.dtype = d;
    c.op = op;
    c.timeout_ns = kPatientNs;
    c.timeout = static_cast<cu::PeerTimeout*>(timeout);
    return c;
  }
  void upload(std::size_t count, DataType d, int call) {
    std::vector<std::byte> host(count * concord::size_of(d));
    for (std::size_t i = 0; i < count; ++i) {
      put(d, host.data() + i * concord::size_of(d), value(world_rank(), i, call));
    }
    ok(cudaMemcpy(static_cast<std::byte*>(inputs.mine()) + offset, host.data(), host.size(),
                  cudaMemcpyHostToDevice));
    ok(cudaDeviceSynchronize());
  }
  // Elements of the output that differ from the expected values.
  std::size_t wrong(std::size_t count, DataType d, ReduceOp op, int call) {
    std::vector<std::byte> host(count * concord::size_of(d));
    ok(cudaMemcpy(host.data(), static_cast<std::byte*>(outputs.mine()) + offset, host.size(),
                  cudaMemcpyDeviceToHost));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i) {
      bad += get(d, host.data() + i * concord::size_of(d)) != expected(op, i, call, world_size());
    }
    return bad;
  }
  cu::PeerTimeout recorded() {
    cu::PeerTimeout t{};
    ok(cudaMemcpy(&t, timeout, sizeof t, cudaMemcpyDeviceToHost));
    return t;
  }

  Shared inputs;
  Shared outputs;
  Shared flags;
  void* timeout = nullptr;
  std::size_t offset;
};

struct StreamHandle {
  StreamHandle() { ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~StreamHandle() { cudaStreamDestroy(s); }
  cudaStream_t s = nullptr;
};

}  // namespace

// The two kernels, by name.
struct Kernel {
  const char* name;
  void (*run)(const cu::PeerAllreduce&, concord::CudaStream);
};
const Kernel kKernels[] = {{"one shot", cu::one_shot_allreduce},
                           {"two shot", cu::two_shot_allreduce}};

TEST_CASE("peer allreduce: every dtype, op and size, aligned or not", "[gpu][peer]") {
  StreamHandle stream;
  constexpr std::size_t kMost = 70'001;  // several blocks of packs, and a tail
  for (const Kernel& kernel : kKernels) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{4}}) {
      Call call(kMost, offset);
      std::uint32_t sequence = 0;
      for (DataType d : {DataType::Int8, DataType::Int32, DataType::Float16, DataType::BFloat16,
                         DataType::Float32, DataType::Float64}) {
        if (offset % concord::size_of(d) != 0) continue;
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
          for (std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{4096}, kMost}) {
            INFO(kernel.name << ": " << concord::to_string(d) << " " << concord::to_string(op)
                             << " count " << count << " offset " << offset);
            const int k = static_cast<int>(++sequence);
            call.upload(count, d, k);
            kernel.run(call.describe(count, d, op, sequence), stream.s);
            ok(cudaStreamSynchronize(stream.s));
            CHECK(call.wrong(count, d, op, k) == 0);
          }
        }
      }
      CHECK(call.recorded().sequence == 0);
    }
  }
}

TEST_CASE("peer allreduce: calls back to back while ranks run at different paces", "[gpu][peer]") {
  StreamHandle stream;
  constexpr std::size_t count = 5000;
  for (const Kernel& kernel : kKernels) {
    Call call(count, 0);
    for (int k = 1; k <= 30; ++k) {
      INFO(kernel.name << ": call " << k);
      // Ranks fall behind in turn: the others finish a call and start the next one
      // (publish its flags) while the late rank still works on this one.
      if (k % world_size() == world_rank()) usleep(2000);
      call.upload(count, DataType::Float32, k);
      kernel.run(call.describe(count, DataType::Float32, ReduceOp::Sum, k), stream.s);
      ok(cudaStreamSynchronize(stream.s));
      REQUIRE(call.wrong(count, DataType::Float32, ReduceOp::Sum, k) == 0);
    }
    CHECK(call.recorded().sequence == 0);
  }
}

TEST_CASE("peer allreduce: a rank that never arrives is recorded, not waited for", "[gpu][peer]") {
  StreamHandle stream;
  const int absent = world_size() - 1;
  for (const Kernel& kernel : kKernels) {
    INFO(kernel.name);
    Call call(1000, 0);
    call.upload(1000, DataType::Float32, 1);
    if (world_rank() != absent) {
      cu::PeerAllreduce c = call.describe(1000, DataType::Float32, ReduceOp::Sum, 7);
      c.timeout_ns = 300'000'000;  // 0.3 s
      kernel.run(c, stream.s);
      ok(cudaStreamSynchronize(stream.s));
      const cu::PeerTimeout t = call.recorded();
      CHECK(t.sequence == 7);
      CHECK(t.missing_ranks == (1u << absent));
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_CASE("peer allreduce: calls that break its rules are refused, naming why", "[gpu][peer]") {
  Call call(16, 0);
  const auto refused = [](const Kernel& kernel, const cu::PeerAllreduce& c,
                          const std::string& why) {
    try {
      kernel.run(c, nullptr);
      FAIL(kernel.name << " accepted: " << why);
    } catch (const concord::Error& e) {
      CHECK(e.code() == concord::ErrorCode::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains(why));
    }
  };
  for (const Kernel& kernel : kKernels) {
    INFO(kernel.name);
    cu::PeerAllreduce c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
    c.ranks = cu::kMaxPeerRanks + 1;
    refused(kernel, c, "ranks 9 outside 1..8");
    c = call.describe(16, DataType::Float32, ReduceOp::Sum, 0);
    refused(kernel, c, "sequence 0");
    c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
    c.outputs[world_rank()] = const_cast<void*>(c.inputs[world_rank()]);
    refused(kernel, c, "the output overlaps the input");
    c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
    c.timeout = nullptr;
    refused(kernel, c, "no timeout record");
    c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
    c.dtype = static_cast<DataType>(99);
    refused(kernel, c, "out of range");
  }
  // A peer's output: two shot copies from it, one shot never reads it.
  const int peer = (world_rank() + 1) % world_size();
  cu::PeerAllreduce c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
  c.outputs[peer] = nullptr;
  refused(kKernels[1], c, "null output of rank " + std::to_string(peer));
}
