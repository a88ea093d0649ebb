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

// cudaMalloc'd memory; empty when bytes == 0.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  std::byte* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  // Grows to at least `bytes` (contents are not kept).
  void reserve(std::size_t bytes);

 private:
  std::byte* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost): the staging buffers of host paths.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;

  std::byte* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  void reserve(std::size_t bytes);

 private:
  std::byte* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

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

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace concord::detail::cuda
