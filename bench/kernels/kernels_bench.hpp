// `concord-bench kernels`: concord's CUDA kernels on one GPU, against the device's
// own copy engine path (cudaMemcpyAsync device to device):
//   reduce          dst = a op b per size, dtype and op; GB/s counts the 3n bytes a
//                   call moves, memcpy's the 2n bytes, and the ratio of the two is
//                   how close the kernel gets to a plain copy (target: >= 0.9)
//   --model FILE    pack a model's gradient tensors into one fusion buffer and unpack
//                   them again, with one batched_copy launch each way against one
//                   cudaMemcpyAsync per tensor
// Timed with CUDA events on one stream, median of repeated samples; every result is
// checked once against the host (bit for bit) before timing. Rank 0 measures; other
// ranks (under mpiexec) wait. Needs a build with CUDA (CONCORD_BENCH_CUDA).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace concord::bench {

struct KernelsArgs {
  std::string sizes = "4K:256M";
  std::string dtypes = "float32";  // comma list
  std::string ops = "sum";         // comma list
  int iterations = 20;             // timed samples per measurement (median)
  int warmup = 3;                  // untimed calls first
  std::size_t offset = 0;          // elements added to every reduce pointer
  double factor = 1.0;             // --model: the unpack's scale factor
  std::string model_path;
  std::string json_path;
};

// Runs the subcommand; returns the exit status (3 when validation failed).
int run_kernels_command(KernelsArgs& args);

}  // namespace concord::bench
