// --impl device-one-shot and device-two-shot for `concord-bench allreduce --device
// cuda`: the device-synchronised kernels (reduce/cuda_peer_kernels.hpp) timed on their
// own, without concord's allreduce around them (dispatch, the choice between them,
// pieces of a region), one kernel per call from the send buffer to the receive buffer,
// with the tuning table's block count. Built with CUDA only.
#pragma once

#include "allreduce/device_bench.hpp"

#include <utility>

namespace concord::bench {

// Throws std::invalid_argument where the kernels cannot run: ranks on several nodes,
// more ranks than they take, or Avg (whose scaling they leave to the caller).
// Its synchronisation also throws where a kernel recorded a timeout.
std::pair<RunFn, SyncFn> peer_kernel_impl(DeviceBench& device, const Communicator& comm,
                                          const AllreduceOptions& o, bool two_shot);

}  // namespace concord::bench
