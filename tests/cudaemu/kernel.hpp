// Compiles a .cu file with the host compiler for the CUDA emulator: force-included
// (-include) before the file's own code. Kernels become host functions; a launch
// (CONCORD_LAUNCH, reduce/cuda_launch.cuh) queues on the emulated stream a task
// that calls the kernel once per thread of the grid, block after block, with the
// built-in index variables set. Threads run one after another and in reverse
// order within a block, so a kernel that silently relies on thread order or on
// one thread's writes being seen by another without a barrier has a chance to
// show it; __syncthreads is a no-op (only valid for kernels whose barriers order
// thread 0's work before the others', as run in this order: lower threads last).
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cudaemu/emulator.hpp"

#undef __global__
#undef __device__
#undef __host__
#undef __launch_bounds__
#undef __grid_constant__
#undef __forceinline__
#define __global__
#define __device__
#define __host__
#define __launch_bounds__(...)
#define __grid_constant__
#define __forceinline__ inline

inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

inline void __syncthreads() {}

inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace cudaemu {

// What a real launch checks before it queues anything.
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr unsigned kMaxGridX = 0x7fffffffu;
inline constexpr std::size_t kMaxParameterBytes = 32764;

template <class... Params>
class Launch {
 public:
  using Kernel = void (*)(Params...);
  Launch(dim3 grid, dim3 block, cudaStream_t stream, Kernel kernel)
      : grid_(grid), block_(block), stream_(stream), kernel_(kernel) {}

  template <class... Args>
  void operator()(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params), "kernel argument count");
    constexpr std::size_t bytes = (std::size_t{0} + ... + sizeof(std::decay_t<Params>));
    if (grid_.x == 0 || grid_.y == 0 || grid_.z == 0 || block_.x == 0 || block_.y == 0 ||
        block_.z == 0 || block_.x * block_.y * block_.z > kMaxThreadsPerBlock ||
        grid_.x > kMaxGridX || bytes > kMaxParameterBytes) {
      set_launch_error(cudaErrorInvalidConfiguration);
      return;
    }
    if (grid_.y != 1 || grid_.z != 1 || block_.y != 1 || block_.z != 1) {
      set_launch_error(cudaErrorNotSupported);  // the emulator runs 1-D grids only
      return;
    }
    // Parameters are copied at launch, as the hardware does.
    auto params = std::make_shared<std::tuple<std::decay_t<Params>...>>(
        static_cast<std::decay_t<Params>>(std::forward<Args>(args))...);
    const dim3 grid = grid_;
    const dim3 block = block_;
    const Kernel kernel = kernel_;
    enqueue(stream_, [grid, block, kernel, params] {
      gridDim = grid;
      blockDim = block;
      for (unsigned b = 0; b < grid.x; ++b) {
        blockIdx = dim3(b, 0, 0);
        for (unsigned t = block.x; t-- > 0;) {
          threadIdx = dim3(t, 0, 0);
          std::apply(kernel, *params);
        }
      }
    });
  }

 private:
  dim3 grid_;
  dim3 block_;
  cudaStream_t stream_;
  Kernel kernel_;
};

template <class... Params>
Launch<Params...> launch(dim3 grid, dim3 block, cudaStream_t stream, void (*kernel)(Params...)) {
  return Launch<Params...>(grid, block, stream, kernel);
}

}  // namespace cudaemu

#define CONCORD_CUDAEMU_LAUNCH(grid, block, stream, ...) \
  ::cudaemu::launch(grid, block, stream, &__VA_ARGS__)
