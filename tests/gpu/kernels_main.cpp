// Catch2 for the single-process GPU kernel tests (test_gpu_kernels.cpp,
// test_gpu_copy_kernels.cpp). Without a usable CUDA device it prints why and exits
// with 77, which CTest reports as skipped (SKIP_RETURN_CODE 77).
#include "support/catch_session.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char** argv) {
  constexpr int kSkipped = 77;
  int devices = 0;
  const cudaError_t rc = cudaGetDeviceCount(&devices);
  if (rc != cudaSuccess || devices == 0) {
    std::printf("skipped: no CUDA device (%s)\n",
                rc != cudaSuccess ? cudaGetErrorString(rc) : "no device is visible");
    return kSkipped;
  }
  return concord::test::run_catch(argc, argv).exit_status();
}
