// The engine's device buckets in a build without CUDA: none. The engine's
// validation refuses device tensors first (require_cuda); these say so again.
#include "device/device_path.hpp"
#include "engine/device_buckets.hpp"

namespace concord::detail {

struct DeviceBucketState {};

void DeviceBucketStateDeleter::operator()(DeviceBucketState* state) const {
  delete state;
}

std::shared_ptr<cuda::Event> record_ready_event(const void*, CudaStream) {
  require_cuda("Engine", -1);
  return nullptr;
}

// No device buckets get here (validation refused their tensors): nothing grows.
DeviceFusionGrowth grow_device_fusion(const std::vector<Bucket>&, DeviceBucketStatePtr&) {
  return {};
}

void run_device_bucket(const Bucket&, const Communicator& comm, Algorithm, DeviceBucketStatePtr&) {
  require_cuda("Engine", comm.rank());
}

void copy_device_to_host(void*, const void*, std::size_t, const std::shared_ptr<cuda::Event>&) {
  require_cuda("Engine", -1);
}

void copy_host_to_device(void*, const void*, std::size_t, const std::shared_ptr<cuda::Event>&) {
  require_cuda("Engine", -1);
}

}  // namespace concord::detail
