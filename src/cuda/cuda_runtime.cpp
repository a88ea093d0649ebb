#include "cuda/cuda_runtime.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

namespace concord::detail::cuda {

void check(cudaError_t result, const char* call, int rank) {
  if (result == cudaSuccess) return;
  throw Error(
      ErrorCode::Internal, rank,
      fmt::format("{}: {}: {}", call, cudaGetErrorName(result), cudaGetErrorString(result)));
}

int device_count(std::string* why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-less error so later calls start clean
    if (why != nullptr) *why = fmt::format("{} ({})", cudaGetErrorString(rc), cudaGetErrorName(rc));
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "no CUDA device is visible";
  return count;
}

int current_device() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

DeviceGuard::DeviceGuard(int device) {
  check(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
}
DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

void* DeviceMemory::allocate(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}
void DeviceMemory::release(void* p) noexcept {
  if (p != nullptr) cudaFree(p);
}

void* PinnedMemory::allocate(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes), "cudaMallocHost");
  return p;
}
void PinnedMemory::release(void* p) noexcept {
  if (p != nullptr) cudaFreeHost(p);
}

Stream::Stream() {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
}
Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}
void Stream::synchronize() const {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

Event::Event(bool timing) {
  check(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
}
Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}
void Event::record(cudaStream_t stream) {
  check(cudaEventRecord(event_, stream), "cudaEventRecord");
}
void Event::make_wait(cudaStream_t stream) const {
  check(cudaStreamWaitEvent(stream, event_, 0), "cudaStreamWaitEvent");
}
void Event::synchronize() const {
  check(cudaEventSynchronize(event_), "cudaEventSynchronize");
}
bool Event::done() const {
  const cudaError_t rc = cudaEventQuery(event_);
  if (rc == cudaErrorNotReady) return false;
  check(rc, "cudaEventQuery");
  return true;
}

}  // namespace concord::detail::cuda
