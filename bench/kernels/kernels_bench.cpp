#include "kernels/kernels_bench.hpp"
#include "kernels/kernels_plan.hpp"

#include "common/bench_options.hpp"

#include <concord/types.hpp>

#include <fmt/format.h>
#include <mpi.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <climits>
#include <exception>
#include <stdexcept>
#include <thread>
#include <tuple>

namespace concord::bench {
namespace {

KernelsPlan check_args(const KernelsArgs& a) {
  KernelsPlan p;
  for (const std::string& name : split_list(a.dtypes)) p.dtypes.push_back(parse_data_type(name));
  for (const std::string& name : split_list(a.ops)) p.ops.push_back(parse_reduce_op(name));
  if (p.dtypes.empty() || p.ops.empty()) throw std::invalid_argument("-T and -o need a value");
  if (!a.model_path.empty()) {
    if (!is_floating_point(p.dtypes[0]) && a.factor != 1.0) {
      throw std::invalid_argument(fmt::format("--factor {} needs a floating-point -T, not {}",
                                              a.factor, to_string(p.dtypes[0])));
    }
    return p;
  }
  std::tie(p.min_bytes, p.max_bytes) = parse_size_range(a.sizes);
  for (DataType d : p.dtypes) {
    size_steps(p.min_bytes, p.max_bytes, size_of(d));  // checks -m for every dtype
    for (ReduceOp op : p.ops) {
      if (!is_supported(d, op)) {
        throw std::invalid_argument(
            fmt::format("-o {} is not defined for -T {}", to_string(op), to_string(d)));
      }
    }
  }
  return p;
}

}  // namespace

CLI::App* add_kernels_command(CLI::App& app, KernelsArgs& a) {
  CLI::App* k = app.add_subcommand(
      "kernels",
      "concord's CUDA kernels on one GPU: reduce bandwidth vs cudaMemcpyAsync by size, or "
      "(--model) packing a model's gradients with batched_copy vs one memcpy per tensor");
  k->add_option("-m,--message-size", a.sizes, "MIN:MAX bytes, doubling (K, M, G suffixes)")
      ->capture_default_str();
  k->add_option("-T,--type", a.dtypes,
                "Comma list: int8, uint8, int32, int64, float16, bfloat16, float32, float64 "
                "(--model: the first)")
      ->capture_default_str();
  k->add_option("-o,--op", a.ops, "Comma list: sum, prod, min, max, avg")->capture_default_str();
  k->add_option("-i,--iterations", a.iterations, "Timed samples per measurement (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, INT_MAX));
  k->add_option("-x,--warmup", a.warmup, "Untimed calls before each measurement")
      ->capture_default_str()
      ->check(CLI::Range(0, INT_MAX));
  k->add_option("--offset", a.offset,
                "Elements added to every reduce pointer (1: not 16-byte aligned)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  k->add_option("--model", a.model_path,
                "Model file (name<TAB>shape<TAB>elements per line): time packing its gradients "
                "into one fusion buffer and back instead of reduce");
  k->add_option("--factor", a.factor, "--model: scale factor applied while unpacking")
      ->capture_default_str();
  k->add_option("--json", a.json_path, "Also write one JSON record per measurement here");
  return k;
}

int run_kernels_command(KernelsArgs& a) {
  const KernelsPlan plan = check_args(a);
#if CONCORD_BENCH_CUDA
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Rank 0 measures alone; the others wait without spinning, and rank 0 joins them
  // whatever happened, so none is left waiting.
  int status = 0;
  std::exception_ptr error;
  if (rank == 0) {
    try {
      status = measure_kernels(a, plan);
    } catch (...) {
      error = std::current_exception();
    }
  }
  MPI_Request done = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &done);
  for (int finished = 0; !finished;) {
    MPI_Test(&done, &finished, MPI_STATUS_IGNORE);
    if (!finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (error) std::rethrow_exception(error);
  return status;
#else
  (void)plan;
  throw std::runtime_error(
      "kernels: this concord-bench was built without CUDA (configure on a machine with nvcc, "
      "CONCORD_WITH_CUDA=ON)");
#endif
}

}  // namespace concord::bench
