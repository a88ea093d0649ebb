// --impl device-one-shot and device-two-shot for `concord-bench allreduce --device
// cuda`: the device-synchronised kernels (reduce/cuda_peer_kernels.hpp) timed on their
// own, before they have a place in concord's allreduce path, against NCCL and the
// path of today in the same run. A call copies the send buffer into this rank's IPC
// input region, runs the kernel, and copies the result out of its IPC output region,
// all on the bench's stream, as the path will have to. Built with CUDA only.
#pragma once

#include "allreduce/device_bench.hpp"

namespace concord::bench {

// Throws std::invalid_argument where the kernels cannot run: ranks on several nodes,
// more ranks than they take, or Avg (whose scaling they leave to the caller).
RunFn peer_kernel_impl(DeviceBench& device, const Communicator& comm, const AllreduceOptions& o,
                       bool two_shot);

}  // namespace concord::bench
