// The one place where a host call meets device work: which memory a buffer is in,
// the blocking allreduce on CUDA buffers, and the engine's device buckets. Built
// with CONCORD_WITH_CUDA from device_allreduce.cpp and device_buckets.cpp;
// without it from device_stub.cpp, which classifies everything as host memory and
// rejects Device::Cuda with a clear error.
#pragma once

#include <concord/allreduce.hpp>
#include <concord/communicator.hpp>
#include <concord/types.hpp>

#include <cstddef>
#include <memory>
#include <span>

namespace concord::detail {

struct Bucket;

// Where `ptr` lies, through the pointer-attribute cache; Device::Cpu without a
// CUDA build or device. Cheap when no device is present (one cached flag).
// Device memory of another GPU than the current one: Error(InvalidArgument)
// labelled with `rank`.
Device classify_pointer(const void* ptr, int rank);

// The blocking allreduce on device buffers (arguments already validated, the
// same on every rank, count > 0): CUDA IPC among the ranks of a node (also
// several ranks on one GPU), NCCL or host staging across nodes, pinned-host
// staging when IPC cannot be set up. Ordered on options.stream.
void allreduce_device(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
                      const Communicator& comm, const AllreduceOptions& options);

// An event recorded on `stream` now (on the device that holds `tensor`): the
// engine's device work waits for it, so it touches a tensor only after the work
// the caller queued before enqueueing it.
std::shared_ptr<void> record_ready_event(const void* tensor, CudaStream stream);

// Runs one fusion bucket of device tensors over `comm`: waits for the tensors'
// ready events, packs them (prescaled) into a device fusion buffer with one
// batched-copy launch, allreduces it, unpacks (scaled), and returns once the
// results are on the device. Single-tensor buckets are reduced in place.
void run_device_bucket(const Bucket& bucket, const Communicator& comm, Algorithm algorithm);

// Device <-> host copies for the engine's broadcast and allgather of device
// tensors: ordered after the tensor's ready event, and complete on return (the
// data is on the device for any stream's later work).
void copy_device_to_host(void* host, const void* device, std::size_t bytes,
                         const std::shared_ptr<void>& ready);
void copy_host_to_device(void* device, const void* host, std::size_t bytes,
                         const std::shared_ptr<void>& ready);

}  // namespace concord::detail
