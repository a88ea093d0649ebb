// What `concord-bench kernels` made of its command line (kernels_bench.cpp), and
// the measurement that runs it on a GPU (kernels_gpu.cpp; CUDA builds only).
#pragma once

#include "kernels/kernels_bench.hpp"

#include <concord/types.hpp>

#include <cstddef>
#include <vector>

namespace concord::bench {

// The command line, checked: the same errors with or without CUDA.
struct KernelsPlan {
  std::size_t min_bytes = 0;
  std::size_t max_bytes = 0;
  std::vector<DataType> dtypes;
  std::vector<ReduceOp> ops;
};

// Rank 0's measurement: reduce vs memcpy by size, or --model's pack and unpack.
// Returns the exit status (3 when a result was wrong). CUDA builds only.
int measure_kernels(const KernelsArgs& a, const KernelsPlan& p);

}  // namespace concord::bench
