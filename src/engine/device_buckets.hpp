// The engine's device tensors: ready events, fused device buckets, and the copies
// its broadcast and allgather make through host memory. Built from
// device_buckets.cpp with CONCORD_WITH_CUDA, else from device_buckets_none.cpp
// (every function refuses with a clear error; validation stops device tensors earlier).
#pragma once

#include "engine/fusion.hpp"

#include <concord/communicator.hpp>
#include <concord/types.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <vector>

namespace concord::detail {

// What the engine keeps for its device buckets: its own stream and fusion
// buffer, made by the first device bucket or the first growth of the buffer.
struct DeviceBucketState;
struct DeviceBucketStateDeleter {
  void operator()(DeviceBucketState* state) const;
};
using DeviceBucketStatePtr = std::unique_ptr<DeviceBucketState, DeviceBucketStateDeleter>;

// An event recorded on `stream` now (on the device that holds `tensor`): the
// engine's device work waits for it, so it touches a tensor only after the work
// the caller queued before enqueueing it.
std::shared_ptr<cuda::Event> record_ready_event(const void* tensor, CudaStream stream);

// Grows the device fusion buffer (making the state on first use) to hold the
// largest of `buckets`' fused device buckets, before any runs. `grew` says whether
// it had to, which is the same on every rank (they plan the same buckets and grew
// the buffer alike before); what the growth threw is in `failed`, not thrown, so
// that every rank comes to the agreement on it (EngineCore::size_device_fusion).
struct DeviceFusionGrowth {
  bool grew = false;
  std::size_t bytes = 0;  // the size asked for
  std::exception_ptr failed;
};
DeviceFusionGrowth grow_device_fusion(const std::vector<Bucket>& buckets,
                                      DeviceBucketStatePtr& state);

// Runs one fusion bucket of device tensors over `comm`: waits for the tensors'
// ready events, packs them (prescaled) into the device fusion buffer with one
// batched-copy launch, allreduces it through dispatch_allreduce, unpacks
// (scaled), and returns once the results are on the device. Single-tensor
// buckets are reduced in place.
void run_device_bucket(const Bucket& bucket, const Communicator& comm, Algorithm algorithm,
                       DeviceBucketStatePtr& state);

// Device <-> host copies for the engine's broadcast and allgather of device
// tensors: ordered after the tensor's ready event, and complete on return.
void copy_device_to_host(void* host, const void* device, std::size_t bytes,
                         const std::shared_ptr<cuda::Event>& ready);
void copy_host_to_device(void* device, const void* host, std::size_t bytes,
                         const std::shared_ptr<cuda::Event>& ready);

}  // namespace concord::detail
