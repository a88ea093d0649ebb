// The device paths of a build without CUDA: none. dispatch_allreduce refuses
// Device::Cuda earlier (require_cuda); this says so again should it get here.
#include "device/device_path.hpp"
#include "dispatch/paths.hpp"

namespace concord::detail {

void run_device_allreduce(const Call&, const Communicator& comm, bool) {
  require_cuda("allreduce", comm.rank());
}

void check_device_failure(const Communicator&) {}  // no device calls, no device failures

void poison_device_arenas(const CommunicatorState&) {}  // no device arenas

}  // namespace concord::detail
