// What the CUDA kernel tests share (test_gpu_kernels.cpp: reduce, reduce_many and
// scale; test_gpu_copy_kernels.cpp: batched_copy and argument errors): the counts
// and guards, the NaN rule that is not bit for bit, random inputs, device arrays
// and the mismatch report.
#pragma once
#include "cuda/cuda_runtime.hpp"
#include "reduce/cuda_element_ops.cuh"
#include "reduce/cuda_kernels.hpp"
#include "reduce/reduce_tables.hpp"
#include "unit/element_types.hpp"

#include <concord/error.hpp>
#include <concord/types.hpp>

#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <ios>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace gpu_kernel_checks {

using concord::DataType;
using concord::ReduceOp;
namespace cuda = concord::detail::cuda;
namespace ops = concord::detail::cuda::ops;
using concord::test::bits64;
using concord::test::both_nan_other_choice;
using concord::test::is_nan_value;
using concord::test::kAllOps;
using concord::test::kAllTypes;
using concord::test::kFloatTypes;
using concord::test::with_element_type;

// The largest count makes every kernel's grid-stride loop go round at least
// twice and end in a partial pack: a grid holds multiprocessors x 2048 threads
// (cuda_launch.cuh), each moving 16 bytes (16 elements of the narrowest type)
// per pass. 131075 on the CUDA emulator's two multiprocessors, where a fixed
// million made this file the slowest test of the sanitizer build without
// covering more. Capped at 2 Mi + 3, so the host references stay quick on a
// large GPU (an H100's 132 multiprocessors would ask for 8.7 million): there
// the types of 4 bytes and more still go round twice.
inline std::size_t large_count() {
  int device = 0;
  int multiprocessors = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) ==
          cudaSuccess);
  const std::size_t twice = 2 * static_cast<std::size_t>(multiprocessors) * 2048 * 16 + 3;
  return std::min(twice, (std::size_t{1} << 21) + 3);
}
inline std::vector<std::size_t> counts() {
  return {0, 1, 3, 17, large_count()};
}
inline constexpr std::size_t kGuard = 16;  // elements before and after every region

// ---- values ------------------------------------------------------------------------

template <class T>
T random_value(DataType d, std::mt19937_64& rng) {
  const std::uint64_t r = rng();
  const unsigned pick = static_cast<unsigned>(r >> 56);
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    using L = std::numeric_limits<T>;
    const T specials[] = {T(0),
                          T(-0.0),
                          L::infinity(),
                          -L::infinity(),
                          L::denorm_min(),
                          -L::denorm_min(),
                          L::max(),
                          L::lowest(),
                          L::min(),
                          T(1)};
    if (pick < 16) return specials[r % std::size(specials)];
    if (pick < 128) {  // moderate values
      return static_cast<T>((static_cast<double>(r & 0xffffffffffffu) / 0x1p48 - 0.5) * 2000.0);
    }
    return std::bit_cast<T>(static_cast<Bits>(r));  // any bits: NaNs (~0.2-0.4%) too
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    auto v = static_cast<std::uint16_t>(r);
    if (pick < 128) {  // near 1 in magnitude: sums round, with many ties
      const unsigned k = (r >> 20) & 3;
      v = d == DataType::Float16 ? static_cast<std::uint16_t>((v & 0x83ff) | (0x3400 + (k << 10)))
                                 : static_cast<std::uint16_t>((v & 0x807f) | (0x3e80 + (k << 7)));
    }
    return v;
  } else {
    return static_cast<T>(r);
  }
}

template <class T>
std::vector<T> random_vector(DataType d, std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (T& x : v) x = random_value<T>(d, rng);
  return v;
}

// ---- device memory -------------------------------------------------------------------

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host)
      : buffer_(std::max<std::size_t>(1, host.size()) * sizeof(T)), size_(host.size()) {
    upload(host);
  }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == size_);
    cuda::check(cudaMemcpy(buffer_.get(), host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice),
                "cudaMemcpy");
    // From pageable memory cudaMemcpy returns before the data lands, queued on the
    // legacy stream, which the non-blocking streams the kernels run on ignore.
    cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    cuda::check(cudaMemcpy(host.data(), buffer_.get(), size_ * sizeof(T), cudaMemcpyDeviceToHost),
                "cudaMemcpy");
    return host;
  }
  T* at(std::size_t i) { return reinterpret_cast<T*>(buffer_.get()) + i; }

 private:
  cuda::DeviceBuffer buffer_;
  std::size_t size_;
};

// Mismatches between the device's and the expected buffer, with the first few.
struct Report {
  std::size_t bad = 0;
  std::vector<std::string> first;
  template <class T>
  void add(std::size_t i, T want, T got) {
    if (bad++ < 5) {
      std::ostringstream s;
      s << "index " << i << std::hex << ": want 0x" << bits64(want) << ", got 0x" << bits64(got);
      first.push_back(s.str());
    }
  }
};

}  // namespace gpu_kernel_checks
