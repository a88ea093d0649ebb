// What the device-synchronised kernels' tests share (test_peer_kernels.cpp: the
// results; test_peer_kernels_failures.cpp: a rank that never arrives, the probe,
// refusals): the ranks, the inputs' formula and the expected values, one call's
// IPC arena and buffers, and the two kernels by name.
#pragma once
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

namespace peer_kernel_checks {

namespace cu = concord::detail::cuda;
using concord::DataType;
using concord::ReduceOp;

inline constexpr std::uint64_t kPatientNs = 120'000'000'000;  // no correct call waits this long
// Blocks per kernel: several, as the path runs them on the emulated GPU (its 2 SMs'
// resident blocks shared by the ranks on it), so meetings pair many blocks.
inline constexpr int kBlocks = 8;

inline void ok(cudaError_t rc) {
  REQUIRE(rc == cudaSuccess);
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Small non-negative integers as each dtype's bits, and back.
inline std::uint16_t half_bits(unsigned n) {  // exact for n < 2048
  if (n == 0) return 0;
  int e = 0;
  while ((n >> (e + 1)) != 0) ++e;
  const unsigned mantissa = (n << (10 - e)) & 0x3ffu;
  return static_cast<std::uint16_t>(((e + 15) << 10) | mantissa);
}
inline double from_half(std::uint16_t b) {
  const int e = (b >> 10) & 0x1f;
  const int m = b & 0x3ff;
  return e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
}
inline std::uint16_t bfloat_bits(unsigned n) {
  const float f = static_cast<float>(n);
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);  // exact for n < 256
}
inline double from_bfloat(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t{b} << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

inline void put(DataType d, std::byte* p, unsigned n) {
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
inline double get(DataType d, const std::byte* p) {
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
inline unsigned value(int rank, std::size_t i, int call) {
  return 1 + static_cast<unsigned>((i * 7 + static_cast<std::size_t>(rank) * 5 + call) % 3);
}
inline double expected(ReduceOp op, std::size_t i, int call, int ranks) {
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
inline const char* name_of(Placement p) {
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

// The two kernels, by name.
struct Kernel {
  const char* name;
  void (*run)(const cu::PeerAllreduce&, concord::CudaStream);
};
inline const Kernel kKernels[] = {{"one shot", cu::one_shot_allreduce},
                                  {"two shot", cu::two_shot_allreduce}};

}  // namespace peer_kernel_checks
