// The emulator's memory: device allocations (memfd between guard pages, shareable
// between processes), pinned host memory, copies and memsets checked against their
// allocations, CUDA IPC through /proc/<pid>/fd, and the one driver entry point
// concord fetches (cuMemGetAddressRange).
#include "cudaemu/state.hpp"

#include "cudaemu/emulator.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <sys/mman.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace cudaemu::detail {

namespace {

constexpr std::size_t kAlignment = 256;  // cudaMalloc's guarantee
constexpr unsigned char kFreshDeviceByte = 0xCD;

// What an IPC handle carries: the owner's memfd, reachable through /proc, and the
// allocation's serial: as CUDA's, the handle of memory allocated anew (at the same
// address, with a reused descriptor) is another handle.
struct IpcHandle {
  std::uint64_t magic;
  std::uint64_t serial;
  std::int32_t pid;
  std::int32_t fd;
  std::uint64_t bytes;
  std::uint64_t file_bytes;
  std::uint64_t offset;
  std::int32_t device;
};
static_assert(sizeof(IpcHandle) <= CUDA_IPC_HANDLE_SIZE);
constexpr std::uint64_t kIpcMagic = 0x636f6e636f726431ULL;  // "concord1"

std::size_t page_size() {
  return static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}
std::size_t page_round(std::size_t bytes) {
  const std::size_t page = page_size();
  return (bytes + page - 1) / page * page;
}

// Device memory: `file_bytes` of `fd` mapped between two inaccessible guard
// pages, so a kernel or copy running off either end of an allocation faults
// (the allocation ends at the upper guard, up to cudaMalloc's 256-byte alignment).
// Returns the start of the file's mapping, or nullptr.
std::byte* map_guarded(int fd, std::size_t file_bytes, std::byte** reservation,
                       std::size_t* reserved) {
  const std::size_t page = page_size();
  *reserved = file_bytes + 2 * page;
  *reservation = state().device_space.take(*reserved);
  if (*reservation == nullptr) return nullptr;
  void* data =
      mmap(*reservation + page, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (data == MAP_FAILED) {
    state().device_space.give(*reservation, *reserved);
    return nullptr;
  }
  return static_cast<std::byte*>(data);
}

}  // namespace

const Allocation* find(const void* p, std::size_t bytes, bool* partial) {
  State& st = state();
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = st.allocations.upper_bound(a);
  if (it == st.allocations.begin()) return nullptr;
  --it;
  const Allocation& al = it->second;
  const auto base = reinterpret_cast<std::uintptr_t>(al.base);
  if (a >= base + std::max<std::size_t>(al.bytes, 1)) return nullptr;
  if (partial != nullptr) *partial = a + bytes > base + al.bytes;
  return &al;
}

namespace {

// Whether a copy's side may be touched: either no allocation (host memory the
// emulator does not track) or wholly inside one.
bool in_bounds(const void* p, std::size_t bytes) {
  bool partial = false;
  const Allocation* al = find(p, bytes, &partial);
  return al == nullptr || !partial;
}

bool is_device(const void* p) {
  const Allocation* al = find(p);
  return al != nullptr && al->kind != Kind::Pinned;
}

// A copy with cudaMemcpyDefault semantics; the explicit kinds must match the
// pointers as the real runtime checks them (device where it says device).
cudaError_t check_copy(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  if (!in_bounds(dst, count) || !in_bounds(src, count)) return cudaErrorInvalidValue;
  const bool dst_dev = is_device(dst);
  const bool src_dev = is_device(src);
  switch (kind) {
    case cudaMemcpyHostToDevice:
      if (!dst_dev || src_dev) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyDeviceToHost:
      if (dst_dev || !src_dev) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyDeviceToDevice:
      if (!dst_dev || !src_dev) return cudaErrorInvalidValue;
      break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
      break;
    default:
      return cudaErrorInvalidMemcpyDirection;
  }
  return cudaSuccess;
}

// Pageable host memory: a side neither device nor pinned.
bool pageable(const void* p) {
  return find(p) == nullptr;
}

// The copy as a queued op. A pageable host source is read now (the real runtime
// stages it before returning), so the caller may reuse it at once.
std::function<void()> copy_op(void* dst, const void* src, std::size_t count) {
  if (pageable(src) && is_device(dst)) {
    auto staged = std::make_shared<std::vector<std::byte>>(
        static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + count);
    return [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); };
  }
  return [=] { std::memmove(dst, src, count); };
}

// cudaFree, cudaFreeHost and cudaIpcCloseMemHandle: `ptr` must be the base of an
// allocation of `kind`. Like the real calls they wait for the device first, since
// queued work may still use the memory.
cudaError_t release(void* ptr, Kind kind) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  if (capture_forbids()) return fail(cudaErrorStreamCaptureUnsupported);
  auto it = st.allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == st.allocations.end() || it->second.kind != kind) return fail(cudaErrorInvalidValue);
  for (int d = 0; d < st.devices; ++d) run_device(d);
  const Allocation al = it->second;
  st.allocations.erase(it);
  if (kind == Kind::Pinned) {
    munmap(al.reservation, al.reserved);
  } else {
    st.device_space.give(al.reservation, al.reserved);
  }
  // Only this process's own allocations count against its device's memory (an
  // opened IPC handle maps a peer's).
  if (kind == Kind::Device) {
    st.device_memory_used[static_cast<std::size_t>(al.device)] -= al.file_bytes;
  }
  if (al.fd >= 0) close(al.fd);
  return cudaSuccess;
}

// What this process's live allocations take of the current device's memory (never
// more than it has: cudaMalloc checks first), or nullptr when there is no such device.
std::size_t* memory_taken_on_current_device(State& st) {
  const int device = current_device();
  if (device >= st.devices) return nullptr;
  return &st.device_memory_used[static_cast<std::size_t>(device)];
}

CUresult emulated_mem_get_address_range(CUdeviceptr* base, std::size_t* bytes, CUdeviceptr ptr) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  const Allocation* al = find(reinterpret_cast<const void*>(ptr));
  if (al == nullptr || al->kind == Kind::Pinned) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = reinterpret_cast<CUdeviceptr>(al->base);
  if (bytes != nullptr) *bytes = al->bytes;
  return CUDA_SUCCESS;
}

}  // namespace

}  // namespace cudaemu::detail

// The CUDA calls below are the emulator's interface; what they use is its own.
using namespace cudaemu::detail;

extern "C" {

// ---- memory ---------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  State& st = state();
  std::lock_guard lock(st.mutex);
  if (capture_forbids()) return fail(cudaErrorStreamCaptureUnsupported);
  const std::size_t used = (size + kAlignment - 1) / kAlignment * kAlignment;
  const std::size_t file_bytes = page_round(used);
  std::size_t* taken = memory_taken_on_current_device(st);
  if (taken == nullptr) return fail(cudaErrorNoDevice);
  if (file_bytes > st.device_memory_bytes - *taken) {
    return fail(cudaErrorMemoryAllocation);  // the device is full
  }
  const int fd = memfd_create("cudaemu-device", MFD_CLOEXEC);
  if (fd < 0) return fail(cudaErrorMemoryAllocation);
  Allocation al;
  std::byte* data = nullptr;
  if (ftruncate(fd, static_cast<off_t>(file_bytes)) != 0 ||
      (data = map_guarded(fd, file_bytes, &al.reservation, &al.reserved)) == nullptr) {
    close(fd);
    return fail(cudaErrorMemoryAllocation);
  }
  std::memset(data, kFreshDeviceByte, file_bytes);
  al.offset = file_bytes - used;  // the end against the upper guard page
  al.base = data + al.offset;
  al.bytes = size;
  al.kind = Kind::Device;
  al.device = current_device();
  al.fd = fd;
  al.file_bytes = file_bytes;
  al.serial = ++st.allocation_serials;
  st.allocations[reinterpret_cast<std::uintptr_t>(al.base)] = al;
  *taken += file_bytes;
  *ptr = al.base;
  return cudaSuccess;
}

// What the current device has left of CUDAEMU_DEVICE_MEMORY_BYTES after this
// process's allocations (a real GPU's free memory also counts other processes').
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const std::size_t* taken = memory_taken_on_current_device(st);
  if (taken == nullptr) return fail(cudaErrorNoDevice);
  *total = st.device_memory_bytes;
  *free = st.device_memory_bytes - *taken;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  return ptr == nullptr ? cudaSuccess : release(ptr, Kind::Device);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  State& st = state();
  std::lock_guard lock(st.mutex);
  if (capture_forbids()) return fail(cudaErrorStreamCaptureUnsupported);
  const std::size_t mapped = page_round(size);
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
  Allocation al;
  al.base = static_cast<std::byte*>(p);
  al.bytes = size;
  al.reservation = al.base;
  al.reserved = mapped;
  al.kind = Kind::Pinned;
  al.device = current_device();
  st.allocations[reinterpret_cast<std::uintptr_t>(p)] = al;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  return ptr == nullptr ? cudaSuccess : release(ptr, Kind::Pinned);
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  if (attr == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  *attr = cudaPointerAttributes{};
  const Allocation* al = find(ptr);
  if (al == nullptr) {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
    return cudaSuccess;
  }
  attr->device = al->device;
  if (al->kind == Kind::Pinned) {
    attr->type = cudaMemoryTypeHost;
    attr->hostPointer = const_cast<void*>(ptr);
    attr->devicePointer = const_cast<void*>(ptr);
  } else {
    attr->type = cudaMemoryTypeDevice;
    attr->devicePointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

// Asynchronous in every case the CUDA documentation allows: only the pageable
// source is staged at once; a copy into pageable host memory "might be
// synchronous", so code must not rely on it and here it is not.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  if (const cudaError_t e = check_copy(dst, src, count, kind); e != cudaSuccess) return fail(e);
  if (count == 0) return cudaSuccess;
  return cudaemu::enqueue(stream, copy_op(dst, src, count));
}

// As documented for cudaMemcpy: to host memory it returns once the copy is done;
// from pageable host memory to the device, once the source is staged (the legacy
// stream's earlier work done first), the write itself still queued; from pinned
// memory to the device, once done; device to device, without waiting.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  if (capture_forbids()) return fail(cudaErrorStreamCaptureUnsupported);
  if (const cudaError_t e = check_copy(dst, src, count, kind); e != cudaSuccess) return fail(e);
  if (count == 0) return cudaSuccess;
  const bool to_device = is_device(dst);
  if (to_device && pageable(src)) run_legacy_and_blocking(current_device());
  cudaemu::enqueue(nullptr, copy_op(dst, src, count));
  if (!to_device || (!pageable(src) && !is_device(src))) run_legacy_and_blocking(current_device());
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  if (count == 0) return cudaSuccess;
  bool partial = false;
  const Allocation* al = find(ptr, count, &partial);
  if (al == nullptr || partial || al->kind == Kind::Pinned) return fail(cudaErrorInvalidValue);
  return cudaemu::enqueue(stream, [=] { std::memset(ptr, value, count); });
}

cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  // Asynchronous to the host for device memory, like the real one: ordered on the
  // legacy default stream only.
  return cudaMemsetAsync(ptr, value, count, nullptr);
}

// ---- IPC ------------------------------------------------------------------------

cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* ptr) {
  if (handle == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const Allocation* al = find(ptr);
  if (al == nullptr || al->kind != Kind::Device) return fail(cudaErrorInvalidValue);
  // The handle names the whole allocation, as the real one does: the importer's
  // pointer is the allocation's base, whatever pointer was exported.
  IpcHandle h{kIpcMagic,  al->serial, static_cast<std::int32_t>(getpid()),
              al->fd,     al->bytes,  al->file_bytes,
              al->offset, al->device};
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, &h, sizeof h);
  return cudaSuccess;
}

cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t handle, unsigned int /*flags*/) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue);
  IpcHandle h{};
  std::memcpy(&h, handle.reserved, sizeof h);
  if (h.magic != kIpcMagic) return fail(cudaErrorInvalidValue);
  if (h.pid == getpid()) return fail(cudaErrorDeviceUninitialized);  // as CUDA refuses
  State& st = state();
  std::lock_guard lock(st.mutex);
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return fail(cudaErrorMapBufferObjectFailed);
  Allocation al;
  std::byte* data = map_guarded(fd, h.file_bytes, &al.reservation, &al.reserved);
  close(fd);
  if (data == nullptr) return fail(cudaErrorMapBufferObjectFailed);
  al.base = data + h.offset;
  al.bytes = h.bytes;
  al.kind = Kind::Imported;
  al.device = h.device;
  st.allocations[reinterpret_cast<std::uintptr_t>(al.base)] = al;
  *ptr = al.base;
  return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void* ptr) {
  return release(ptr, Kind::Imported);
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn,
                                             unsigned int /*version*/, unsigned long long /*flags*/,
                                             cudaDriverEntryPointQueryResult* status) {
  if (symbol == nullptr || fn == nullptr) return fail(cudaErrorInvalidValue);
  *fn = nullptr;
  if (std::strcmp(symbol, "cuMemGetAddressRange") == 0) {
    *fn = reinterpret_cast<void*>(&emulated_mem_get_address_range);
    if (status != nullptr) *status = cudaDriverEntryPointSuccess;
    return cudaSuccess;
  }
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

}  // extern "C"
