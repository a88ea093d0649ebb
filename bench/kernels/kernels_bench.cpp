#include "kernels/kernels_bench.hpp"
#include "kernels/kernels_plan.hpp"

#include "common/bench_options.hpp"

#include <concord/types.hpp>

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
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
