// The engine's device buckets: fusion of CUDA tensors with one batched-copy
// launch each way around the device allreduce, on the engine's own stream.
#include "engine/device_buckets.hpp"

#include "cuda/cuda_runtime.hpp"
#include "device/pointer_query.hpp"
#include "dispatch/dispatch.hpp"
#include "reduce/cuda_kernels.hpp"

#include <concord/error.hpp>

#include <vector>

namespace concord::detail {
namespace {

// The engine thread starts on device 0: work on the device the tensors are on.
int device_of(const void* ptr) {
  const PointerInfo info = pointer_cache().lookup(ptr);
  if (info.device != Device::Cuda) {
    throw Error(ErrorCode::InvalidArgument, -1,
                "Engine: a tensor marked Device::Cuda is not in CUDA device memory");
  }
  return info.ordinal;
}

// The bucket's first tensor with elements, or null if it has none. An empty tensor
// is never asked where it lies: its data may be null (torch's empty CUDA tensors
// are), or point anywhere, and it has nothing to copy or reduce.
const Work* first_with_data(const Bucket& bucket) {
  for (const auto& w : bucket.works) {
    if (w->tensor.count > 0) return w.get();
  }
  return nullptr;
}

void wait_ready(const Bucket& bucket, cudaStream_t stream) {
  for (const auto& w : bucket.works) {
    if (w->ready) w->ready->make_wait(stream);
  }
}

}  // namespace

struct DeviceBucketState {
  cuda::Stream stream;
  cuda::DeviceBuffer fusion;
};

void DeviceBucketStateDeleter::operator()(DeviceBucketState* state) const {
  delete state;
}

namespace {

// The bucket's work is queued; its handles complete, and the fusion buffer is
// reused, only once the GPU has done it all. A device-synchronised call whose
// kernels timed out fails the bucket here (and the communicator for good).
void finish(const DeviceBucketState& state, const Communicator& comm) {
  state.stream.synchronize();
  check_device_failure(comm);
}

}  // namespace

std::shared_ptr<cuda::Event> record_ready_event(const void* tensor, CudaStream stream) {
  // The event belongs to the stream's device, which holds the tensor.
  cuda::DeviceGuard on(device_of(tensor));
  auto event = std::make_shared<cuda::Event>();
  event->record(stream);
  return event;
}

DeviceFusionGrowth grow_device_fusion(const std::vector<Bucket>& buckets,
                                      DeviceBucketStatePtr& state) {
  DeviceFusionGrowth growth;
  const Bucket* largest = nullptr;
  for (const Bucket& b : buckets) {
    if (b.device != Device::Cuda || b.works.size() == 1) continue;  // one tensor: in place
    const std::size_t bytes = b.count * size_of(b.dtype);
    if (bytes > growth.bytes || largest == nullptr) {
      largest = &b;
      growth.bytes = bytes;
    }
  }
  // Whether it grows depends on sizes only, which every rank has alike: a rank
  // without the state (its first device bucket failed to make it) has 0 bytes.
  const std::size_t have = state ? state->fusion.bytes() : 0;
  if (largest == nullptr || growth.bytes <= have) return growth;
  growth.grew = true;
  try {
    // It grows to more than 0 bytes: some tensor has elements.
    cuda::DeviceGuard on(device_of(first_with_data(*largest)->tensor.data));
    if (!state) state.reset(new DeviceBucketState);
    state->fusion.reserve(growth.bytes);
  } catch (...) {
    growth.failed = std::current_exception();
  }
  return growth;
}

void run_device_bucket(const Bucket& bucket, const Communicator& comm, Algorithm algorithm,
                       DeviceBucketStatePtr& state) {
  // Empty tensors only: nothing to reduce, on any rank (the counts are agreed).
  if (bucket.count == 0) return;
  const Work& first = *first_with_data(bucket);
  cuda::DeviceGuard on(device_of(first.tensor.data));
  if (!state) state.reset(new DeviceBucketState);
  cudaStream_t stream = state->stream.get();
  wait_ready(bucket, stream);

  AllreduceOptions options;
  options.algorithm = algorithm;
  options.device = Device::Cuda;
  options.stream = stream;
  const int ranks = comm.size();
  const std::size_t esize = size_of(bucket.dtype);

  if (bucket.works.size() == 1) {
    // Reduced where it lies: no copies at all.
    if (first.sig.prescale != 1.0) {
      cuda::scale(first.tensor.data, first.tensor.count, bucket.dtype, first.sig.prescale, stream);
    }
    dispatch_allreduce("allreduce", first.tensor.data, first.tensor.data, first.tensor.count,
                       bucket.dtype, bucket.op, comm, options);
    const double factor = output_scale(first.sig, ranks);
    if (factor != 1.0) {
      cuda::scale(first.tensor.data, first.tensor.count, bucket.dtype, factor, stream);
    }
    finish(*state, comm);
    return;
  }

  // Grown before the cycle's buckets ran (grow_device_fusion): growing here would let
  // one rank fail alone between its peers' collectives again.
  if (state->fusion.bytes() < bucket.count * esize) {
    throw Error(ErrorCode::Internal, comm.rank(),
                "Engine: a device bucket's fusion buffer was not grown before the cycle");
  }
  std::byte* fused = state->fusion.get();
  std::vector<cuda::CopyItem> items;
  items.reserve(bucket.works.size());
  std::size_t offset = 0;
  for (const auto& w : bucket.works) {
    if (w->tensor.count == 0) continue;  // its data may be null
    items.push_back({w->tensor.data, fused + offset, w->tensor.count, w->sig.prescale});
    offset += w->tensor.count * esize;
  }
  cuda::batched_copy(items, bucket.dtype, stream);
  dispatch_allreduce("allreduce", fused, fused, bucket.count, bucket.dtype, bucket.op, comm,
                     options);
  offset = 0;
  items.clear();
  for (const auto& w : bucket.works) {
    if (w->tensor.count == 0) continue;
    items.push_back({fused + offset, w->tensor.data, w->tensor.count, output_scale(w->sig, ranks)});
    offset += w->tensor.count * esize;
  }
  cuda::batched_copy(items, bucket.dtype, stream);
  finish(*state, comm);
}

void copy_device_to_host(void* host, const void* device, std::size_t bytes,
                         const std::shared_ptr<cuda::Event>& ready) {
  if (bytes == 0) return;
  cuda::DeviceGuard on(device_of(device));
  if (ready) ready->synchronize();
  cuda::check(cudaMemcpy(host, device, bytes, cudaMemcpyDefault), "cudaMemcpy");
}

void copy_host_to_device(void* device, const void* host, std::size_t bytes,
                         const std::shared_ptr<cuda::Event>& ready) {
  if (bytes == 0) return;
  cuda::DeviceGuard on(device_of(device));
  // The caller's earlier writes to the tensor first, or they would land on top.
  if (ready) ready->synchronize();
  // From pageable memory cudaMemcpy returns before the data is on the device:
  // copy on a stream of our own and wait for it.
  cuda::Stream stream;
  cuda::check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream.get()),
              "cudaMemcpyAsync");
  stream.synchronize();
}

}  // namespace concord::detail
