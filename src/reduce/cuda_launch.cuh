// What cuda_kernels.cu and cuda_batched_copy.cu share: block and grid sizes, the
// 16-byte pack every thread loads and stores, and launch error handling. CUDA only.
#pragma once

#include <concord/error.hpp>
#include <concord/types.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

// kernel<<<grid, block, 0, stream>>>, written CONCORD_LAUNCH(grid, block, stream,
// kernel)(args...) so that the CUDA emulator's build (tests/cudaemu/kernel.hpp,
// force-included there) can turn it into a queued host call. Each launch first reads
// away an error an earlier runtime call left (forget_earlier_error), so that the
// check_launch after it reports this launch's failure only.
#if defined(CONCORD_CUDAEMU_LAUNCH)
#define CONCORD_LAUNCH(grid, block, stream, ...)   \
  ::concord::detail::cuda::forget_earlier_error(), \
      CONCORD_CUDAEMU_LAUNCH(grid, block, stream, __VA_ARGS__)
#else
#define CONCORD_LAUNCH(grid, block, stream, ...) \
  ::concord::detail::cuda::forget_earlier_error(), __VA_ARGS__<<<grid, block, 0, stream>>>
#endif

namespace concord::detail::cuda {

inline constexpr int kThreadsPerBlock = 256;
// Grids are sized to fill every SM at full occupancy (2048 resident threads per SM
// on sm_80 and sm_90) and no more: grid-stride loops cover the rest of the work, so
// no block waits for a second wave and none is launched for nothing.
inline constexpr int kBlocksPerSm = 2048 / kThreadsPerBlock;

// Multiprocessors of the device current on this thread; the attribute is queried
// once per device and cached.
int multiprocessor_count();

// Blocks for `work` independent units of one thread each (at least one block).
inline unsigned grid_blocks(std::size_t work) {
  const std::size_t wanted = (work + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const std::size_t most = static_cast<std::size_t>(multiprocessor_count()) * kBlocksPerSm;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min(wanted, most)));
}

// 16 bytes of T: what one thread moves per load and store (one 128-bit transaction
// per thread, so a warp reads 512 contiguous bytes at a time).
template <class T>
struct alignas(16) Pack {
  static constexpr int kCount = 16 / static_cast<int>(sizeof(T));
  T v[kCount];
};

// cudaGetLastError holds the last error of any runtime call on the thread until it is
// read: one the application's own call returned (a cudaMalloc that failed, say) would
// otherwise be reported as concord's launch failure, on one rank while its peers go
// on. That call returned the error to its caller already; a sticky error (a kernel
// that faulted) fails the launch itself again.
inline void forget_earlier_error() {
  static_cast<void>(cudaGetLastError());
}

// After a launch: throws Error(Internal) "<kernel> (<what>): <CUDA's name>: <message>"
// when cudaGetLastError reports a failure.
void check_launch(const char* kernel, const std::string& what);

// "<dtype> <op>" / "<dtype>", for messages.
inline std::string describe(DataType dtype, ReduceOp op) {
  return std::string(to_string(dtype)) + " " + std::string(to_string(op));
}
inline std::string describe(DataType dtype) {
  return std::string(to_string(dtype));
}

[[noreturn]] inline void invalid_argument(const std::string& message) {
  throw Error(ErrorCode::InvalidArgument, -1, message);
}

// Runs `body`, letting only concord::Error out: anything else (std::bad_alloc from
// building a message or a vector) becomes Error(Internal) naming `where`.
template <class Body>
void guarded(const char* where, Body&& body) {
  try {
    body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Internal, -1, std::string(where) + ": " + e.what());
  } catch (...) {
    throw Error(ErrorCode::Internal, -1, std::string(where) + ": unknown exception");
  }
}

}  // namespace concord::detail::cuda
