// The device path of a build without CUDA: every buffer is host memory, and
// Device::Cuda is refused with an error that says how to get it.
#include "device/device_path.hpp"

#include <concord/error.hpp>

namespace concord::detail {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  throw Error(ErrorCode::InvalidArgument, -1,
              std::string(what) +
                  ": CUDA buffers need a concord built with CUDA (CONCORD_WITH_CUDA found no "
                  "nvcc when this one was configured)");
}

}  // namespace

Device classify_pointer(const void*, int) {
  return Device::Cpu;
}

void allreduce_device(const void*, void*, std::size_t, DataType, ReduceOp, const Communicator&,
                      const AllreduceOptions&) {
  no_cuda("allreduce");
}

std::shared_ptr<void> record_ready_event(const void*, CudaStream) {
  no_cuda("Engine");
}

void run_device_bucket(const Bucket&, const Communicator&, Algorithm) {
  no_cuda("Engine");
}

void copy_device_to_host(void*, const void*, std::size_t, const std::shared_ptr<void>&) {
  no_cuda("Engine");
}

void copy_host_to_device(void*, const void*, std::size_t, const std::shared_ptr<void>&) {
  no_cuda("Engine");
}

}  // namespace concord::detail
