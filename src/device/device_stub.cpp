// Buffer classification in a build without CUDA: every buffer is host memory.
#include "device/device_path.hpp"

namespace concord::detail {

Device classify_pointer(const void*, int) {
  return Device::Cpu;
}

void check_on_current_gpu(const void*, int) {}

}  // namespace concord::detail
