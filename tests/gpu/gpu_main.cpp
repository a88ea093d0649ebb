// Catch2 under MPI for the GPU tests. Without a CUDA device on any rank, every
// rank prints why and exits with 77, which CTest reports as skipped. Each rank
// takes GPU local_rank % device_count, so several ranks may share one GPU.
#include "support/catch_session.hpp"

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstdio>
#include <string>

namespace {
constexpr int kSkipped = 77;
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  std::string why = rc != cudaSuccess ? cudaGetErrorString(rc) : "no device is visible";
  int have = rc == cudaSuccess && devices > 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (have == 0) {
    if (rank == 0) std::printf("skipped: no CUDA device (%s)\n", why.c_str());
    MPI_Finalize();
    return kSkipped;
  }
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank = 0;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  cudaSetDevice(local_rank % devices);

  const concord::test::CatchOutcome outcome = concord::test::run_catch(argc, argv);
  if (outcome.command_line_error != 0) MPI_Abort(MPI_COMM_WORLD, outcome.command_line_error);
  int failures = outcome.failures;
  int any_failures = 0;
  MPI_Allreduce(&failures, &any_failures, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failures == 0 ? 0 : 1;
}
