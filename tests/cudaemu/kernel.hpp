// Compiles a .cu file with the host compiler for the CUDA emulator: force-included
// (-include) before the file's own code. Kernels become host functions; a launch
// (CONCORD_LAUNCH, reduce/cuda_launch.cuh) queues on the emulated stream a task that
// runs the grid through the grid scheduler (grid.hpp): every thread on a fiber of
// its own, the blocks under way together, __syncthreads a barrier of the block and
// __nanosleep (the pause of a polling loop) a turn for the other threads. Threads
// start in reverse order within a block, so a kernel that relies on thread order
// without a barrier has a chance to show it.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cudaemu/emulator.hpp"
#include "cudaemu/grid.hpp"

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

// Initial-exec: a kernel reads these in every loop, and the default model's
// __tls_get_addr call (intercepted by ASan) cost more than the kernels' own work.
#define CUDAEMU_BUILTIN inline thread_local __attribute__((tls_model("initial-exec")))
CUDAEMU_BUILTIN dim3 threadIdx;
CUDAEMU_BUILTIN dim3 blockIdx;
CUDAEMU_BUILTIN dim3 blockDim;
CUDAEMU_BUILTIN dim3 gridDim;
#undef CUDAEMU_BUILTIN

inline void __syncthreads() {
  cudaemu::block_barrier();
}
inline int __syncthreads_or(int predicate) {
  return cudaemu::block_barrier_or(predicate);
}
inline void __nanosleep(unsigned /*ns*/) {
  cudaemu::poll_pause();
}
// Fibers of one host thread share its view of memory; across processes (a peer's
// IPC mapping) the host's fence orders as the GPU's system-scope fence does.
inline void __threadfence_block() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __threadfence_system() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
// Device atomics on 32-bit words, as the host's (other processes see them through
// the shared mapping of device memory).
inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned value) {
  std::atomic_ref<unsigned>(*address).compare_exchange_strong(compare, value);
  return compare;  // the old value, whether or not it was replaced
}
inline unsigned atomicOr(unsigned* address, unsigned value) {
  return std::atomic_ref<unsigned>(*address).fetch_or(value);
}
inline unsigned atomicAdd(unsigned* address, unsigned value) {
  return std::atomic_ref<unsigned>(*address).fetch_add(value);
}

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
    enqueue_kernel(stream_, [grid, block, kernel, params] {
      struct Running {
        dim3 grid, block;
        Kernel kernel;
        std::tuple<std::decay_t<Params>...>* params;
      } running{grid, block, kernel, params.get()};
      GridKernel k;
      k.context = &running;
      k.enter = [](void* context, unsigned b, unsigned t) {
        const Running& r = *static_cast<const Running*>(context);
        gridDim = r.grid;
        blockDim = r.block;
        blockIdx = dim3(b, 0, 0);
        threadIdx = dim3(t, 0, 0);
      };
      k.run = [](void* context) {
        const Running& r = *static_cast<const Running*>(context);
        std::apply(r.kernel, *r.params);
      };
      run_grid(grid.x, block.x, k);
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
