// The device-synchronised allreduce kernels (reduce/cuda_peer_kernels.hpp), one shot
// and two shot, and the concurrency probe, at 2 and 3 ranks, on one GPU or two: each
// rank's flags, input and output in a CUDA IPC arena (transport/cuda_ipc_arena.hpp,
// as the device path has them), its data in ordinary device memory. The
// expected values are computed here from the inputs' formula: small integers, exact
// in every dtype, folded in rank order; 16-bit floats are encoded and decoded here.
#include "reduce/cuda_peer_kernels.hpp"
#include "transport/cuda_ipc_arena.hpp"

#include <concord/error.hpp>
#include <concord/types.hpp>

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace cu = concord::detail::cuda;
using concord::DataType;
using concord::ReduceOp;

constexpr std::uint64_t kPatientNs = 120'000'000'000;  // no correct call waits this long
// Blocks per kernel: several, as the path runs them on the emulated GPU (its 2 SMs'
// resident blocks shared by the ranks on it), so meetings pair many blocks.
constexpr int kBlocks = 8;

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

// Where a call's data starts and its result goes: in the IPC buffers themselves, in
// device memory of the rank's own (copied in by the kernel), or there in place.
enum class Placement { InIpc, Separate, InPlace };
const char* name_of(Placement p) {
  return p == Placement::InIpc ? "in IPC" : p == Placement::Separate ? "separate" : "in place";
}

// One rank's buffers for calls of up to `count` elements of 8 bytes, at `offset` bytes
// into the IPC buffers and `user_offset` into its own (unaligned offsets take the
// kernel's element-by-element head and tail; different ones, its unpacked loops):
// the IPC arena's header (the flags, zero on every rank before any call), regions 0
// (inputs) and 1 (outputs), and two buffers of its own.
struct Call {
  Call(std::size_t count, std::size_t at, std::size_t user_at)
      : offset(at), user_offset(user_at), bytes(std::max(at, user_at) + count * 8) {
    std::string why;
    arena = concord::detail::CudaIpcArena::create(
        MPI_COMM_WORLD,
        {.region_bytes = bytes, .regions = 2, .header_bytes = sizeof(cu::PeerFlags)}, world_rank(),
        &why);
    REQUIRE(arena != nullptr);
    ok(cudaMalloc(&user_in, bytes));
    ok(cudaMalloc(&user_out, bytes));
    ok(cudaMallocHost(reinterpret_cast<void**>(&timeout), sizeof(cu::PeerTimeout)));
    *timeout = {};
  }
  ~Call() {
    cudaFree(user_in);
    cudaFree(user_out);
    cudaFreeHost(timeout);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  std::byte* ipc(int rank, int region) const { return arena->region(rank, region) + offset; }
  std::byte* data_in(Placement p) const {
    return p == Placement::InIpc ? ipc(world_rank(), 0)
                                 : static_cast<std::byte*>(user_in) + user_offset;
  }
  std::byte* result(Placement p) const {
    return p == Placement::InIpc     ? ipc(world_rank(), 1)
           : p == Placement::InPlace ? static_cast<std::byte*>(user_in) + user_offset
                                     : static_cast<std::byte*>(user_out) + user_offset;
  }

  cu::PeerAllreduce describe(std::size_t count, DataType d, ReduceOp op, std::uint32_t number,
                             Placement p = Placement::Separate) {
    cu::PeerAllreduce c;
    c.rank = world_rank();
    c.ranks = world_size();
    c.call = number;
    for (int r = 0; r < c.ranks; ++r) {
      c.flags[r] = reinterpret_cast<cu::PeerFlags*>(arena->header(r));
      c.inputs[r] = ipc(r, 0);
      c.outputs[r] = ipc(r, 1);
    }
    c.source = p == Placement::InIpc ? nullptr : data_in(p);
    c.result = result(p);
    c.count = count;
    c.dtype = d;
    c.op = op;
    c.max_blocks = kBlocks;
    c.timeout_ns = kPatientNs;
    c.timeout = timeout;
    return c;
  }
  void upload(std::size_t count, DataType d, int k, Placement p = Placement::Separate) {
    std::vector<std::byte> host(count * concord::size_of(d));
    for (std::size_t i = 0; i < count; ++i) {
      put(d, host.data() + i * concord::size_of(d), value(world_rank(), i, k));
    }
    ok(cudaMemcpy(data_in(p), host.data(), host.size(), cudaMemcpyHostToDevice));
    ok(cudaDeviceSynchronize());
  }
  // Elements of the result that differ from the expected values.
  std::size_t wrong(std::size_t count, DataType d, ReduceOp op, int k,
                    Placement p = Placement::Separate) {
    std::vector<std::byte> host(count * concord::size_of(d));
    ok(cudaMemcpy(host.data(), result(p), host.size(), cudaMemcpyDeviceToHost));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i) {
      bad += get(d, host.data() + i * concord::size_of(d)) != expected(op, i, k, world_size());
    }
    return bad;
  }

  std::unique_ptr<concord::detail::CudaIpcArena> arena;
  void* user_in = nullptr;
  void* user_out = nullptr;
  cu::PeerTimeout* timeout = nullptr;  // pinned: the kernel writes it, the host reads it
  std::size_t offset;
  std::size_t user_offset;
  std::size_t bytes;
};

struct StreamHandle {
  StreamHandle() { ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~StreamHandle() { cudaStreamDestroy(s); }
  cudaStream_t s = nullptr;
};

// For the direct kernel: every rank's own send and receive buffers, mapped into every
// other rank through CUDA IPC (as the path maps its callers' buffers).
struct Mapped {
  explicit Mapped(std::size_t bytes) {
    for (void** mine : {&send_mine, &recv_mine}) ok(cudaMalloc(mine, bytes));
    for (int which = 0; which < 2; ++which) {
      cudaIpcMemHandle_t handle{};
      ok(cudaIpcGetMemHandle(&handle, which == 0 ? send_mine : recv_mine));
      std::vector<cudaIpcMemHandle_t> all(world_size());
      MPI_Allgather(&handle, sizeof handle, MPI_BYTE, all.data(), sizeof handle, MPI_BYTE,
                    MPI_COMM_WORLD);
      for (int r = 0; r < world_size(); ++r) {
        void* p = which == 0 ? send_mine : recv_mine;
        if (r != world_rank()) {
          ok(cudaIpcOpenMemHandle(&p, all[r], cudaIpcMemLazyEnablePeerAccess));
          opened.push_back(p);
        }
        (which == 0 ? sends : recvs).push_back(static_cast<std::byte*>(p));
      }
    }
  }
  ~Mapped() {
    MPI_Barrier(MPI_COMM_WORLD);  // no peer's kernel still uses this rank's buffers
    for (void* p : opened) cudaIpcCloseMemHandle(p);
    MPI_Barrier(MPI_COMM_WORLD);
    cudaFree(send_mine);
    cudaFree(recv_mine);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;

  void* send_mine = nullptr;
  void* recv_mine = nullptr;
  std::vector<std::byte*> sends;  // rank r's, as mapped here
  std::vector<std::byte*> recvs;
  std::vector<void*> opened;
};

}  // namespace

// The two kernels, by name.
struct Kernel {
  const char* name;
  void (*run)(const cu::PeerAllreduce&, concord::CudaStream);
};
const Kernel kKernels[] = {{"one shot", cu::one_shot_allreduce},
                           {"two shot", cu::two_shot_allreduce}};

TEST_CASE("peer allreduce: every dtype, op and size, aligned or not, wherever the data lies",
          "[gpu][peer]") {
  StreamHandle stream;
  constexpr std::size_t kMost = 70'001;  // several blocks of packs, and a tail
  for (const Kernel& kernel : kKernels) {
    for (const auto& [offset, user_offset] :
         {std::pair<std::size_t, std::size_t>{0, 0}, {4, 4}, {0, 4}}) {
      Call call(kMost, offset, user_offset);
      std::uint32_t number = 0;
      for (DataType d : {DataType::Int8, DataType::Int32, DataType::Float16, DataType::BFloat16,
                         DataType::Float32, DataType::Float64}) {
        if ((offset | user_offset) % concord::size_of(d) != 0) continue;
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
          for (std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{4096}, kMost}) {
            for (Placement p : {Placement::InIpc, Placement::Separate, Placement::InPlace}) {
              INFO(kernel.name << ": " << concord::to_string(d) << " " << concord::to_string(op)
                               << " count " << count << " offsets " << offset << "/" << user_offset
                               << " " << name_of(p));
              const int k = static_cast<int>(++number);
              call.upload(count, d, k, p);
              kernel.run(call.describe(count, d, op, number, p), stream.s);
              ok(cudaStreamSynchronize(stream.s));
              CHECK(call.wrong(count, d, op, k, p) == 0);
            }
          }
        }
      }
      CHECK(call.timeout->call == 0);
    }
  }
}

TEST_CASE(
    "peer allreduce: calls back to back, both kernels and grids mixed, ranks at different "
    "paces",
    "[gpu][peer]") {
  StreamHandle stream;
  constexpr std::size_t counts[] = {5000, 37, 70'001, 1};  // 1 to several blocks
  Call call(70'001, 0, 0);
  for (int k = 1; k <= 32; ++k) {
    const Kernel& kernel = kKernels[k % 2];
    const std::size_t count = counts[(k / 2) % 4];
    INFO(kernel.name << ": call " << k << ", count " << count);
    // Ranks fall behind in turn: the others finish a call and start the next one
    // (publish its flags) while the late rank still works on this one.
    if (k % world_size() == world_rank()) usleep(2000);
    call.upload(count, DataType::Float32, k);
    kernel.run(call.describe(count, DataType::Float32, ReduceOp::Sum, k), stream.s);
    ok(cudaStreamSynchronize(stream.s));
    REQUIRE(call.wrong(count, DataType::Float32, ReduceOp::Sum, k) == 0);
  }
  CHECK(call.timeout->call == 0);
}

TEST_CASE("peer allreduce: calls queued without waiting keep their order and their data",
          "[gpu][peer]") {
  // Each call's input is written on the stream just before it, and its result copied
  // away just after: nothing waits for the GPU until the end.
  StreamHandle stream;
  constexpr std::size_t count = 3000;
  constexpr int calls = 12;
  Call call(count, 0, 0);
  const std::size_t bytes = count * sizeof(float);
  std::vector<float*> inputs(calls);
  std::vector<float*> results(calls);
  for (int k = 0; k < calls; ++k) {
    ok(cudaMalloc(reinterpret_cast<void**>(&inputs[k]), bytes));
    ok(cudaMalloc(reinterpret_cast<void**>(&results[k]), bytes));
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>(value(world_rank(), i, k));
    ok(cudaMemcpy(inputs[k], host.data(), bytes, cudaMemcpyHostToDevice));
  }
  ok(cudaDeviceSynchronize());
  for (int k = 0; k < calls; ++k) {
    ok(cudaMemcpyAsync(call.user_in, inputs[k], bytes, cudaMemcpyDeviceToDevice, stream.s));
    kKernels[k % 2].run(call.describe(count, DataType::Float32, ReduceOp::Sum, k + 1), stream.s);
    ok(cudaMemcpyAsync(results[k], call.user_out, bytes, cudaMemcpyDeviceToDevice, stream.s));
  }
  ok(cudaStreamSynchronize(stream.s));
  for (int k = 0; k < calls; ++k) {
    std::vector<float> got(count);
    ok(cudaMemcpy(got.data(), results[k], bytes, cudaMemcpyDeviceToHost));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i) {
      bad += got[i] != expected(ReduceOp::Sum, i, k, world_size());
    }
    INFO("call " << k + 1);
    CHECK(bad == 0);
    cudaFree(inputs[k]);
    cudaFree(results[k]);
  }
  CHECK(call.timeout->call == 0);
}

TEST_CASE("peer allreduce, direct: every dtype, op and size on the callers' own buffers",
          "[gpu][peer]") {
  StreamHandle stream;
  constexpr std::size_t kMost = 70'001;
  Call call(16, 0, 0);  // its flags and record
  Mapped buffers(kMost * 8 + 8);
  const int me = world_rank();
  std::uint32_t number = 0;
  for (std::size_t offset : {std::size_t{0}, std::size_t{4}}) {
    for (bool in_place : {false, true}) {
      for (DataType d : {DataType::Int8, DataType::Int32, DataType::Float16, DataType::BFloat16,
                         DataType::Float32, DataType::Float64}) {
        if (offset % concord::size_of(d) != 0) continue;
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
          for (std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{4096}, kMost}) {
            INFO(concord::to_string(d) << " " << concord::to_string(op) << " count " << count
                                       << " offset " << offset << (in_place ? " in place" : ""));
            const int k = static_cast<int>(++number);
            cu::PeerAllreduce c = call.describe(count, d, op, number);
            c.source = nullptr;
            c.result = nullptr;
            for (int r = 0; r < c.ranks; ++r) {
              c.inputs[r] = buffers.sends[r] + offset;
              c.outputs[r] = (in_place ? buffers.sends[r] : buffers.recvs[r]) + offset;
            }
            std::vector<std::byte> host(count * concord::size_of(d));
            for (std::size_t i = 0; i < count; ++i) {
              put(d, host.data() + i * concord::size_of(d), value(me, i, k));
            }
            ok(cudaMemcpy(c.inputs[me], host.data(), host.size(), cudaMemcpyHostToDevice));
            ok(cudaDeviceSynchronize());
            MPI_Barrier(MPI_COMM_WORLD);  // every rank's input is there before any kernel
            cu::direct_allreduce(c, stream.s);
            ok(cudaStreamSynchronize(stream.s));
            ok(cudaMemcpy(host.data(), c.outputs[me], host.size(), cudaMemcpyDeviceToHost));
            std::size_t bad = 0;
            for (std::size_t i = 0; i < count; ++i) {
              bad +=
                  get(d, host.data() + i * concord::size_of(d)) != expected(op, i, k, world_size());
            }
            CHECK(bad == 0);
            MPI_Barrier(MPI_COMM_WORLD);  // no rank overwrites an input a peer still reads
          }
        }
      }
    }
  }
  CHECK(call.timeout->call == 0);
  // Its calls count on the same flags as the other kernels': they mix.
  for (int k = 1; k <= 6; ++k) {
    INFO("mixed call " << k);
    call.upload(16, DataType::Float32, 100 + k);
    kKernels[k % 2].run(call.describe(16, DataType::Float32, ReduceOp::Sum, ++number), stream.s);
    ok(cudaStreamSynchronize(stream.s));
    CHECK(call.wrong(16, DataType::Float32, ReduceOp::Sum, 100 + k) == 0);
  }
}

TEST_CASE("peer allreduce: a rank that never arrives is recorded, not waited for", "[gpu][peer]") {
  StreamHandle stream;
  const int absent = world_size() - 1;
  for (const Kernel& kernel : kKernels) {
    INFO(kernel.name);
    Call call(1000, 0, 0);
    call.upload(1000, DataType::Float32, 1);
    if (world_rank() != absent) {
      cu::PeerAllreduce c = call.describe(1000, DataType::Float32, ReduceOp::Sum, 7);
      c.timeout_ns = 300'000'000;  // 0.3 s
      kernel.run(c, stream.s);
      ok(cudaStreamSynchronize(stream.s));
      CHECK(call.timeout->call == 7);
      CHECK(call.timeout->missing_ranks == (1u << absent));
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_CASE("peer probe: the ranks' kernels meet, and one that never comes is recorded",
          "[gpu][peer]") {
  StreamHandle stream;
  Call call(64, 0, 0);
  cu::PeerProbeResult* result = nullptr;
  ok(cudaMallocHost(reinterpret_cast<void**>(&result), sizeof *result));
  cu::PeerProbe probe;
  probe.rank = world_rank();
  probe.ranks = world_size();
  for (int r = 0; r < probe.ranks; ++r) {
    probe.flags[r] = reinterpret_cast<cu::PeerFlags*>(call.arena->header(r));
  }
  probe.rounds = 8;
  probe.timeout_ns = kPatientNs;
  probe.result = result;
  *result = {};
  cu::peer_probe(probe, stream.s);
  ok(cudaStreamSynchronize(stream.s));
  CHECK(result->timeout.call == 0);
  CHECK(result->elapsed_ns > 0);
  // The probe counted its rounds as calls of block 0: an allreduce after it still meets.
  call.upload(37, DataType::Float32, 3);
  cu::one_shot_allreduce(call.describe(37, DataType::Float32, ReduceOp::Sum, 1), stream.s);
  ok(cudaStreamSynchronize(stream.s));
  CHECK(call.wrong(37, DataType::Float32, ReduceOp::Sum, 3) == 0);

  MPI_Barrier(MPI_COMM_WORLD);
  const int absent = world_size() - 1;
  if (world_rank() != absent) {
    *result = {};
    probe.timeout_ns = 200'000'000;  // 0.2 s
    cu::peer_probe(probe, stream.s);
    ok(cudaStreamSynchronize(stream.s));
    CHECK(result->timeout.call == 1);
    CHECK(result->timeout.missing_ranks == (1u << absent));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  cudaFreeHost(result);
}

TEST_CASE("peer allreduce: calls that break its rules are refused, naming why", "[gpu][peer]") {
  Call call(16, 0, 0);
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
  const int me = world_rank();
  for (const Kernel& kernel : kKernels) {
    INFO(kernel.name);
    const cu::PeerAllreduce good = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
    cu::PeerAllreduce c = good;
    c.ranks = cu::kMaxPeerRanks + 1;
    refused(kernel, c, "ranks 9 outside 1..8");
    c = call.describe(16, DataType::Float32, ReduceOp::Sum, 0);
    refused(kernel, c, "call 0");
    c = good;
    c.result = c.inputs[me];
    refused(kernel, c, "the result overlaps this rank's input buffer");
    c = good;
    c.source = static_cast<std::byte*>(c.inputs[me]) + 8;
    refused(kernel, c, "the source overlaps this rank's input buffer");
    c = good;
    c.timeout = nullptr;
    refused(kernel, c, "no timeout record");
    c = good;
    c.max_blocks = cu::kMaxPeerBlocks + 1;
    refused(kernel, c, "max_blocks 129 outside 1..128");
    c = good;
    c.dtype = static_cast<DataType>(99);
    refused(kernel, c, "out of range");
    c = good;
    c.flags[(me + 1) % world_size()] = nullptr;
    refused(kernel, c, "no flags of rank");
  }
  // A peer's output: two shot copies from it, one shot never reads it.
  const int peer = (me + 1) % world_size();
  cu::PeerAllreduce c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
  c.outputs[peer] = nullptr;
  refused(kKernels[1], c, "null output of rank " + std::to_string(peer));
  c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
  c.result = static_cast<std::byte*>(c.outputs[me]) + 4;
  refused(kKernels[1], c, "the result overlaps this rank's output buffer");
  // The direct kernel works on inputs and outputs only, whole or apart.
  const Kernel direct{"direct", cu::direct_allreduce};
  refused(direct, call.describe(16, DataType::Float32, ReduceOp::Sum, 1), "source or result given");
  c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
  c.source = nullptr;
  c.result = nullptr;
  c.outputs[me] = static_cast<std::byte*>(c.inputs[me]) + 4;
  refused(direct, c, "this rank's output overlaps its input without being it");
}
