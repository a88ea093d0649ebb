// The CUDA runtime, wrapped: error checks that throw concord::Error, and RAII
// owners for device memory, pinned host memory, streams and events. Compiled only
// with CONCORD_WITH_CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

namespace concord::detail::cuda {

// Throws Error(Internal) "<call>: <CUDA's name>: <CUDA's message>" unless cudaSuccess.
void check(cudaError_t result, const char* call, int rank = -1);

// Number of CUDA devices this process can use; 0 when there is no driver or no
// device (never throws). `why` gets CUDA's reason when it is 0.
int device_count(std::string* why = nullptr);

// The device current on this thread (cudaGetDevice).
int current_device();

// Whether work queued on `stream` now is being captured into a CUDA graph (an
// invalidated capture counts: what the caller queues would still go to it).
bool is_capturing(cudaStream_t stream);

// Makes `device` current for the scope, restoring the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Where a Buffer's memory comes from.
struct DeviceMemory {  // cudaMalloc: memory of the current device
  static void* allocate(std::size_t bytes);
  static void release(void* p) noexcept;
};
struct PinnedMemory {  // cudaMallocHost: page-locked host memory, the staging buffers
  static void* allocate(std::size_t bytes);
  static void release(void* p) noexcept;
};

// Owned memory of one kind; empty when bytes == 0.
template <class Kind>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t bytes) { reserve(bytes); }
  ~Buffer() { Kind::release(ptr_); }
  Buffer(Buffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Kind::release(ptr_);
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }

  std::byte* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  // Gives the memory up without freeing it (when freeing is unsafe: memory that
  // another process may still have mapped).
  void leak() noexcept {
    ptr_ = nullptr;
    bytes_ = 0;
  }
  // Grows to at least `bytes` (contents are not kept).
  void reserve(std::size_t bytes) {
    if (bytes <= bytes_) return;
    Kind::release(std::exchange(ptr_, nullptr));
    bytes_ = 0;
    ptr_ = static_cast<std::byte*>(Kind::allocate(bytes));
    bytes_ = bytes;
  }

 private:
  std::byte* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<DeviceMemory>;
using PinnedBuffer = Buffer<PinnedMemory>;

// A non-blocking stream (does not synchronise with the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing (the cheap kind), for ordering between streams.
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  // Later work on `stream` waits for the last record() (no host blocking).
  void make_wait(cudaStream_t stream) const;
  void synchronize() const;
  // Whether the work before the last record() has finished (cudaEventQuery).
  bool done() const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace concord::detail::cuda
