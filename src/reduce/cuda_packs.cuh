// What the element-wise kernels share (cuda_kernels.cu, cuda_peer_kernels.cu): how a
// call splits its elements into a head done one by one, whole 16-byte packs, and a
// tail, and a thread's place in its grid-stride loop. CUDA only.
#pragma once

#include "reduce/cuda_launch.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace concord::detail::cuda {

inline std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

// How a kernel splits [0, count): [0, head) one by one, then `packs` Packs, then the
// rest one by one. head == count (and packs == 0) when the pointers' offsets within
// 16 bytes differ, or are not a multiple of the element size.
struct Layout {
  std::size_t head = 0;
  std::size_t packs = 0;
};

template <class T>
Layout layout_for(std::uintptr_t dst, std::uintptr_t offset_mismatch, std::size_t count) {
  const std::uintptr_t offset = dst & 15;
  if ((offset_mismatch & 15) != 0 || offset % sizeof(T) != 0) return {count, 0};
  const std::size_t head = std::min<std::size_t>(count, ((16 - offset) & 15) / sizeof(T));
  return {head, (count - head) / Pack<T>::kCount};
}

// Units of work for grid_blocks: every pack, or every element when not packed.
template <class T>
std::size_t work_of(const Layout& layout, std::size_t count) {
  return layout.packs > 0 ? layout.packs : count;
}

template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* base, std::size_t i) {
  return __builtin_bit_cast(Pack<T>, reinterpret_cast<const uint4*>(base)[i]);
}
template <class T>
__device__ __forceinline__ void store_pack(T* base, std::size_t i, const Pack<T>& p) {
  reinterpret_cast<uint4*>(base)[i] = __builtin_bit_cast(uint4, p);
}

__device__ __forceinline__ std::size_t global_thread() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t grid_threads() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

}  // namespace concord::detail::cuda
