// batched_copy (cuda_kernels.hpp): many tensors, one launch, for packing gradients
// into a fusion buffer and unpacking the reduced result.
//
// The items travel by value as a __grid_constant__ kernel parameter (CUDA 12.1+ on
// sm_70+ allows 32,764 bytes), so a launch needs no descriptor upload and no
// synchronisation before it. Every item is cut into chunks of kChunkBytes; chunk
// offsets are multiples of 16 KiB, so every chunk starts at its item's alignment.
// Blocks take chunks of the whole batch in a grid-stride loop and find the item of
// a chunk by binary search over the items' first-chunk indices (uniform across the
// block: every thread reads the same parameter words).
//
// factor == 1 copies bytes: in 16-byte units when source and destination have the
// same offset within 16 bytes (after a head of single bytes up to the boundary),
// else in the widest unit both allow. Otherwise dst = factor * src element by
// element with the dtype's scale functor (cuda_element_ops.cuh, the host scale()'s
// bits), in 16-byte packs under the same condition.
#include "reduce/cuda_kernels.hpp"

#include "reduce/cuda_element_ops.cuh"
#include "reduce/cuda_launch.cuh"

#include <concord/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

namespace concord::detail::cuda {
namespace {

constexpr std::size_t kChunkBytes = std::size_t{16} << 10;
// Items per launch. A launch passes the whole parameter struct however many items
// it uses, so batches of a few items go in a small struct (~1.5 KiB) and large
// ones in one that fits the 32,764-byte limit.
constexpr int kSmallBatch = 32;
constexpr int kLargeBatch = 512;
constexpr std::size_t kParameterLimit = 32764;

template <class Scale>
struct Item {
  const std::byte* src;
  std::byte* dst;
  std::uint64_t bytes;
  Scale scale;  // used when !copy
  bool copy;    // factor == 1: the bytes as they are
};

template <class Scale, int kCapacity>
struct Batch {
  // Item i holds chunks [first_chunk[i], first_chunk[i + 1]); first_chunk[count] is
  // the batch's total.
  std::uint64_t first_chunk[kCapacity + 1];
  Item<Scale> items[kCapacity];
  int count;
};

// The largest i < n with first[i] <= chunk (first[0] == 0 <= chunk).
__device__ __forceinline__ int find_item(const std::uint64_t* first, int n, std::uint64_t chunk) {
  int lo = 0;
  int hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first[mid] <= chunk) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The block copies `bytes` bytes; dst and src are U-aligned.
template <class U>
__device__ __forceinline__ void copy_units(std::byte* dst, const std::byte* src,
                                           std::size_t bytes) {
  const std::size_t units = bytes / sizeof(U);
  const U* s = reinterpret_cast<const U*>(src);
  U* d = reinterpret_cast<U*>(dst);
  for (std::size_t i = threadIdx.x; i < units; i += blockDim.x) d[i] = s[i];
  for (std::size_t i = units * sizeof(U) + threadIdx.x; i < bytes; i += blockDim.x) {
    dst[i] = src[i];
  }
}

__device__ void copy_chunk(std::byte* dst, const std::byte* src, std::size_t bytes) {
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  // The widest unit (16, 8, 4, 2, 1 bytes) in which dst and src are equally offset.
  const unsigned differ = static_cast<unsigned>((d ^ s) & 15u);
  const unsigned unit = differ == 0 ? 16u : (differ & (0u - differ));
  std::size_t head = (unit - (d & (unit - 1))) & (unit - 1);
  if (head > bytes) head = bytes;
  if (threadIdx.x < head) dst[threadIdx.x] = src[threadIdx.x];
  dst += head;
  src += head;
  bytes -= head;
  switch (unit) {
    case 16:
      copy_units<uint4>(dst, src, bytes);
      break;
    case 8:
      copy_units<std::uint64_t>(dst, src, bytes);
      break;
    case 4:
      copy_units<std::uint32_t>(dst, src, bytes);
      break;
    case 2:
      copy_units<std::uint16_t>(dst, src, bytes);
      break;
    default:
      copy_units<std::uint8_t>(dst, src, bytes);
      break;
  }
}

// The block writes dst[i] = op(src[i]) for i < n.
template <class Scale>
__device__ void scale_chunk(std::byte* dst_bytes, const std::byte* src_bytes, std::size_t n,
                            const Scale& op) {
  using T = typename Scale::value_type;
  constexpr int kLanes = Pack<T>::kCount;
  T* dst = reinterpret_cast<T*>(dst_bytes);
  const T* src = reinterpret_cast<const T*>(src_bytes);
  const auto d = reinterpret_cast<std::uintptr_t>(dst_bytes);
  const auto s = reinterpret_cast<std::uintptr_t>(src_bytes);
  std::size_t head = n;
  std::size_t packs = 0;
  if (((d ^ s) & 15u) == 0 && (d & 15u) % sizeof(T) == 0) {
    head = ((16u - (d & 15u)) & 15u) / sizeof(T);
    if (head > n) head = n;
    packs = (n - head) / kLanes;
  }
  const uint4* ps = reinterpret_cast<const uint4*>(src + head);
  uint4* pd = reinterpret_cast<uint4*>(dst + head);
  for (std::size_t i = threadIdx.x; i < packs; i += blockDim.x) {
    Pack<T> x = __builtin_bit_cast(Pack<T>, ps[i]);
#pragma unroll
    for (int k = 0; k < kLanes; ++k) x.v[k] = op(x.v[k]);
    pd[i] = __builtin_bit_cast(uint4, x);
  }
  for (std::size_t i = threadIdx.x; i < head; i += blockDim.x) dst[i] = op(src[i]);
  for (std::size_t i = head + packs * kLanes + threadIdx.x; i < n; i += blockDim.x) {
    dst[i] = op(src[i]);
  }
}

template <class Scale, int kCapacity>
__global__ void __launch_bounds__(kThreadsPerBlock)
    batched_copy_kernel(const __grid_constant__ Batch<Scale, kCapacity> batch) {
  const std::uint64_t total = batch.first_chunk[batch.count];
  for (std::uint64_t chunk = blockIdx.x; chunk < total; chunk += gridDim.x) {
    const int i = find_item(batch.first_chunk, batch.count, chunk);
    const Item<Scale>& item = batch.items[i];
    const std::uint64_t offset = (chunk - batch.first_chunk[i]) * kChunkBytes;
    const std::uint64_t left = item.bytes - offset;
    const std::size_t bytes = left < kChunkBytes ? left : kChunkBytes;
    if constexpr (std::is_same_v<Scale, ops::NoScale>) {
      copy_chunk(item.dst + offset, item.src + offset, bytes);
    } else {
      if (item.copy) {
        copy_chunk(item.dst + offset, item.src + offset, bytes);
      } else {
        scale_chunk(item.dst + offset, item.src + offset,
                    bytes / sizeof(typename Scale::value_type), item.scale);
      }
    }
  }
}

// Launches items[next..] (non-empty ones only) until the batch is full; returns
// where the next batch starts.
template <class Scale, int kCapacity>
std::size_t launch_batch(std::span<const CopyItem> items, std::size_t next,
                         std::size_t element_bytes, CudaStream stream, const std::string& what) {
  static_assert(sizeof(Batch<Scale, kCapacity>) <= kParameterLimit,
                "batched_copy_kernel's parameter exceeds the CUDA limit");
  auto batch = std::make_unique<Batch<Scale, kCapacity>>();
  int n = 0;
  std::uint64_t chunks = 0;
  for (; next < items.size() && n < kCapacity; ++next) {
    const CopyItem& it = items[next];
    if (it.count == 0) continue;
    const std::uint64_t bytes = static_cast<std::uint64_t>(it.count) * element_bytes;
    const bool copy = it.factor == 1.0;
    batch->first_chunk[n] = chunks;
    batch->items[n] = {static_cast<const std::byte*>(it.src), static_cast<std::byte*>(it.dst),
                       bytes, copy ? Scale{} : Scale::make(it.factor), copy};
    chunks += (bytes + kChunkBytes - 1) / kChunkBytes;
    ++n;
  }
  if (n == 0) return next;
  batch->first_chunk[n] = chunks;
  batch->count = n;
  CONCORD_LAUNCH(grid_blocks(chunks * kThreadsPerBlock), kThreadsPerBlock, stream,
                 batched_copy_kernel<Scale, kCapacity>)
  (*batch);
  check_launch("batched_copy_kernel", what);
  return next;
}

template <class Scale>
void launch_batches(std::span<const CopyItem> items, std::size_t element_bytes, CudaStream stream,
                    const std::string& what) {
  std::size_t next = 0;
  while (next < items.size()) {
    // How many non-empty items are left, counting no further than a small batch.
    int left = 0;
    for (std::size_t i = next; i < items.size() && left <= kSmallBatch; ++i) {
      if (items[i].count != 0) ++left;
    }
    if (left == 0) return;
    next = left <= kSmallBatch
               ? launch_batch<Scale, kSmallBatch>(items, next, element_bytes, stream, what)
               : launch_batch<Scale, kLargeBatch>(items, next, element_bytes, stream, what);
  }
}

}  // namespace

void batched_copy(std::span<const CopyItem> items, DataType dtype, CudaStream stream) {
  guarded("cuda::batched_copy", [&] {
    if (static_cast<unsigned>(dtype) > static_cast<unsigned>(DataType::Float64)) {
      invalid_argument("cuda::batched_copy: dtype out of range");
    }
    const std::size_t element_bytes = size_of(dtype);
    // Everything is checked before anything is launched: a bad item copies nothing.
    for (const CopyItem& it : items) {
      if (it.count == 0) continue;
      if (it.src == nullptr || it.dst == nullptr) {
        invalid_argument("cuda::batched_copy: null pointer in an item with count > 0");
      }
      if (it.count > std::numeric_limits<std::uint64_t>::max() / element_bytes) {
        invalid_argument("cuda::batched_copy: item count too large");
      }
      if (it.factor != 1.0 && !is_floating_point(dtype)) {
        invalid_argument("cuda::batched_copy: factor != 1 needs a floating-point dtype, not " +
                         describe(dtype));
      }
    }
    const std::string what = describe(dtype);
    ops::visit_scale_op(dtype, 1.0, /*copy_only_ok=*/true, [&](auto proto) {
      launch_batches<decltype(proto)>(items, element_bytes, stream, what);
    });
  });
}

}  // namespace concord::detail::cuda
