// The emulator's devices (CUDAEMU_DEVICES of them, alike: two multiprocessors of
// an sm_90 part, UUIDs the same in every process) and its error calls.
#include "cudaemu/state.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

// The CUDA calls below are the emulator's interface; what they use is its own.
using namespace cudaemu::detail;

extern "C" {

// ---- errors ---------------------------------------------------------------------

cudaError_t cudaGetLastError(void) {
  return take_last_error();
}

cudaError_t cudaPeekAtLastError(void) {
  return peek_last_error();
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorDeviceUninitialized:
      return "cudaErrorDeviceUninitialized";
    case cudaErrorMapBufferObjectFailed:
      return "cudaErrorMapBufferObjectFailed";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected (emulator: CUDAEMU_DEVICES=0)";
    case cudaErrorDeviceUninitialized:
      return "invalid device context (emulator: an IPC handle opened by the process that made it)";
    default:
      return cudaGetErrorName(error);
  }
}

// ---- devices --------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  *count = st.devices;
  if (st.devices == 0) return fail(cudaErrorNoDevice);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= state().devices) return fail(cudaErrorInvalidDevice);
  set_current_device(device);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= state().devices) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "concord CUDA emulator");
  std::memset(&prop->uuid, 0, sizeof prop->uuid);
  std::memcpy(&prop->uuid, "cudaemu-gpu-", 12);
  prop->uuid.bytes[15] = static_cast<char>(device);
  prop->multiProcessorCount = 2;
  prop->major = 9;
  prop->minor = 0;
  prop->totalGlobalMem = std::size_t{1} << 34;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = 1 << 20;  // small, so benchmarks that size buffers by it stay small
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= state().devices) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = 2;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
      *value = 2048;  // sm_80 and sm_90's
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    default:
      return fail(cudaErrorNotSupported);
  }
}

// Occupancy: what a multiprocessor's 2048 threads hold (the emulated GPU has no
// registers or shared memory to run out of first).
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* func,
                                                                   int block_size,
                                                                   size_t /*shared_bytes*/,
                                                                   unsigned int /*flags*/) {
  if (blocks == nullptr || func == nullptr || block_size <= 0) return fail(cudaErrorInvalidValue);
  *blocks = 2048 / block_size;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (can == nullptr) return fail(cudaErrorInvalidValue);
  const int n = state().devices;
  if (device < 0 || device >= n || peer < 0 || peer >= n) return fail(cudaErrorInvalidDevice);
  *can = device != peer ? 1 : 0;  // as the real call: a device is not its own peer
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  if (capture_forbids()) return fail(cudaErrorStreamCaptureUnsupported);
  run_device(current_device());
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return fail(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

}  // extern "C"
