// The CUDA runtime calls concord makes, emulated on the host (emulator.hpp says
// which semantics are kept and why). Linked instead of libcudart in the
// CONCORD_CUDA_EMULATION build; the declarations are the toolkit's own headers.
//
// Environment: CUDAEMU_DEVICES (default 1) devices, all of one "physical" GPU
// model that every process of the machine sees alike (same UUIDs), so ranks that
// pick the same ordinal share a GPU as far as concord can tell.
#include "cudaemu/emulator.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

// The opaque handle types of the CUDA headers, defined by the emulator.
struct CUstream_st {
  std::uint64_t id = 0;  // what queued ops and events hold: a destroyed stream is not found
  int device = 0;
  bool blocking = true;  // synchronises with the legacy default stream
  bool legacy = false;
  std::deque<std::function<void()>> pending;
  std::uint64_t enqueued = 0;  // ops ever queued
  std::uint64_t done = 0;      // ops run
  // While capturing (cudaStreamBeginCapture): the graph its ops go to instead, the
  // capture's mode, and whether a call the capture forbids has invalidated it.
  struct CUgraph_st* capture = nullptr;
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  bool capture_invalidated = false;
};

// A captured graph, and an instantiated one: the ops in capture order, each run again
// (with the parameters it was captured with) by every launch.
struct CUgraph_st {
  std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> ops;
};

namespace {

using Clock = std::chrono::steady_clock;

struct EventState {
  std::uint64_t stream = 0;  // id of the stream it was last recorded on (0: never)
  std::uint64_t seq = 0;     // the op count it waits for
  bool timing = true;
  Clock::time_point when{};
  bool reached = false;
};

}  // namespace

struct CUevent_st {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
};

namespace {

constexpr std::size_t kAlignment = 256;  // cudaMalloc's guarantee
constexpr unsigned char kFreshDeviceByte = 0xCD;

enum class Kind { Device, Pinned, Imported };

struct Allocation {
  std::byte* base = nullptr;         // what the caller got
  std::size_t bytes = 0;             // what was asked for
  std::byte* reservation = nullptr;  // the whole mapping, guard pages included
  std::size_t reserved = 0;
  Kind kind = Kind::Device;
  int device = 0;
  int fd = -1;                 // memfd of device memory (exported through /proc/<pid>/fd/<fd>)
  std::size_t file_bytes = 0;  // its size; base lies at file offset `offset`
  std::size_t offset = 0;
  std::uint64_t serial = 0;  // which allocation of the process this is (IPC handles differ)
};

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

// Device addresses come from a reservation of their own, as with CUDA's unified
// addressing: an address that was once host memory never becomes device memory
// (concord's pointer cache relies on that), and freed device ranges are handed
// out again as device memory only. First fit over the free ranges.
class DeviceAddressSpace {
 public:
  static constexpr std::size_t kBytes = std::size_t{64} << 30;

  DeviceAddressSpace() {
    void* r = mmap(nullptr, kBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r != MAP_FAILED) free_[reinterpret_cast<std::uintptr_t>(r)] = kBytes;
  }
  // `bytes` (a page multiple) of inaccessible addresses, or nullptr.
  std::byte* take(std::size_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      const std::uintptr_t at = it->first;
      const std::size_t left = it->second - bytes;
      free_.erase(it);
      if (left > 0) free_[at + bytes] = left;
      return reinterpret_cast<std::byte*>(at);
    }
    return nullptr;
  }
  // Makes [p, p + bytes) inaccessible again (dropping what was mapped there) and free.
  void give(std::byte* p, std::size_t bytes) {
    mmap(p, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    auto at = reinterpret_cast<std::uintptr_t>(p);
    auto next = free_.lower_bound(at);
    if (next != free_.end() && next->first == at + bytes) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        prev->second += bytes;
        return;
      }
    }
    free_[at] = bytes;
  }

 private:
  std::map<std::uintptr_t, std::size_t> free_;  // start -> bytes
};

struct State {
  std::recursive_mutex mutex;
  DeviceAddressSpace device_space;
  std::map<std::uintptr_t, Allocation> allocations;  // by base
  std::vector<std::unique_ptr<CUstream_st>> legacy;  // one per device
  std::vector<CUstream_st*> streams;                 // every live stream, legacy included
  int devices = 1;
  std::uint64_t next_id = 1;
  std::uint64_t allocation_serials = 0;

  void add(CUstream_st* s) {
    s->id = next_id++;
    streams.push_back(s);
  }
  CUstream_st* by_id(std::uint64_t id) const {
    for (CUstream_st* s : streams) {
      if (s->id == id) return s;
    }
    return nullptr;  // destroyed, after its work had run
  }
};

State& state() {
  static State* s = [] {
    auto* st = new State();  // never destroyed: static destructors may still call in
    if (const char* v = std::getenv("CUDAEMU_DEVICES")) st->devices = std::max(0, std::atoi(v));
    for (int d = 0; d < st->devices; ++d) {
      auto legacy = std::make_unique<CUstream_st>();
      legacy->device = d;
      legacy->legacy = true;
      st->add(legacy.get());
      st->legacy.push_back(std::move(legacy));
    }
    return st;
  }();
  return *s;
}

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

cudaError_t fail(cudaError_t error) {
  last_error = error;
  return error;
}

// ---- streams --------------------------------------------------------------------

// Runs `stream`'s ops until `upto` of them have run. Ops may run other streams'
// (event waits); an op is popped before it runs, so re-entry continues in order.
void run_until(CUstream_st* stream, std::uint64_t upto) {
  while (stream->done < upto && !stream->pending.empty()) {
    std::function<void()> op = std::move(stream->pending.front());
    stream->pending.pop_front();
    op();
    ++stream->done;
  }
}
void run_all(CUstream_st* stream) {
  run_until(stream, stream->enqueued);
}
void run_until(std::uint64_t id, std::uint64_t upto) {
  if (CUstream_st* s = state().by_id(id)) run_until(s, upto);
}

CUstream_st* resolve(cudaStream_t stream) {
  State& st = state();
  if (stream == nullptr || stream == cudaStreamLegacy) {
    if (current_device >= st.devices) return nullptr;
    return st.legacy[static_cast<std::size_t>(current_device)].get();
  }
  for (CUstream_st* s : st.streams) {
    if (s == stream) return s;
  }
  return nullptr;
}

void push(CUstream_st* s, std::function<void()> op) {
  s->pending.push_back(std::move(op));
  ++s->enqueued;
}

// The device's legacy stream and its blocking streams: what a synchronous call
// on the legacy stream waits for.
void run_legacy_and_blocking(int device) {
  State& st = state();
  for (CUstream_st* s : st.streams) {
    if (s->device == device && (s->blocking || s->legacy)) run_all(s);
  }
}

void run_device(int device) {
  State& st = state();
  for (CUstream_st* s : st.streams) {
    if (s->device == device) run_all(s);
  }
}

// ---- stream capture ---------------------------------------------------------------

// What CUDA refuses while a stream of the process captures in global mode (the
// default): calls that synchronise or allocate ("potentially unsafe" calls). They
// fail with cudaErrorStreamCaptureUnsupported and invalidate those captures, so code
// that would break a capture on a GPU breaks it here too.
bool capture_forbids() {
  bool any = false;
  for (CUstream_st* s : state().streams) {
    if (s->capture != nullptr && s->capture_mode == cudaStreamCaptureModeGlobal) {
      s->capture_invalidated = true;
      any = true;
    }
  }
  return any;
}

// A capturing stream asked to synchronise: refused, and its capture invalidated.
bool capturing(CUstream_st* s) {
  if (s->capture == nullptr) return false;
  s->capture_invalidated = true;
  return true;
}

// ---- memory ---------------------------------------------------------------------

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

// The allocation holding [p, p + bytes), or nullptr when p lies in none; *partial
// is set when p is inside one but the range runs past its end.
const Allocation* find(const void* p, std::size_t bytes = 1, bool* partial = nullptr) {
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
  if (al.fd >= 0) close(al.fd);
  return cudaSuccess;
}

}  // namespace

namespace cudaemu {

cudaError_t enqueue(cudaStream_t stream, std::function<void()> op) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (s->capture != nullptr) {
    s->capture->ops.push_back(std::move(op));  // ordered on the launch's stream when replayed
    return cudaSuccess;
  }
  if (s->legacy) {
    // Legacy work starts after the blocking streams' earlier work.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> before;
    for (CUstream_st* other : st.streams) {
      if (other != s && other->device == s->device && other->blocking) {
        before.emplace_back(other->id, other->enqueued);
      }
    }
    push(s, [before, op = std::move(op)] {
      for (const auto& [other, upto] : before) run_until(other, upto);
      op();
    });
  } else if (s->blocking) {
    CUstream_st* legacy = st.legacy[static_cast<std::size_t>(s->device)].get();
    const std::uint64_t upto = legacy->enqueued;
    push(s, [legacy, upto, op = std::move(op)] {
      run_until(legacy, upto);  // legacy streams live as long as the process
      op();
    });
  } else {
    push(s, std::move(op));
  }
  return cudaSuccess;
}

void set_launch_error(cudaError_t error) {
  last_error = error;
}

namespace {

// CUDAEMU_MPS=0: each emulated GPU runs the kernels of one process at a time, as a
// GPU that processes share without MPS does, here with no time slicing at all (the
// worst case): a kernel that waits for a peer process's kernel on the same GPU
// waits until its own bound runs out. Kernels of processes on different emulated
// GPUs still run at the same time. The turn is an flock on one file per GPU of this
// user, taken by the host thread that runs the kernel.
bool gpus_exclusive() {
  static const bool exclusive = [] {
    const char* v = std::getenv("CUDAEMU_MPS");
    return v != nullptr && std::string(v) == "0";
  }();
  return exclusive;
}

class GpuTurn {
 public:
  explicit GpuTurn(int device) {
    if (!gpus_exclusive()) return;
    const std::string path =
        "/tmp/cudaemu-uid" + std::to_string(getuid()) + "-gpu" + std::to_string(device) + ".lock";
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~GpuTurn() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  GpuTurn(const GpuTurn&) = delete;
  GpuTurn& operator=(const GpuTurn&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

cudaError_t enqueue_kernel(cudaStream_t stream, std::function<void()> grid) {
  int device = 0;
  {
    State& st = state();
    std::lock_guard lock(st.mutex);
    CUstream_st* s = resolve(stream);
    if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
    device = s->device;
  }
  return enqueue(stream, [device, grid = std::move(grid)] {
    GpuTurn turn(device);
    grid();
  });
}

}  // namespace cudaemu

extern "C" {

// ---- errors ---------------------------------------------------------------------

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  return last_error;
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
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= state().devices) return fail(cudaErrorInvalidDevice);
  current_device = device;
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
  run_device(current_device);
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
  al.device = current_device;
  al.fd = fd;
  al.file_bytes = file_bytes;
  al.serial = ++st.allocation_serials;
  st.allocations[reinterpret_cast<std::uintptr_t>(al.base)] = al;
  *ptr = al.base;
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
  al.device = current_device;
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
  if (to_device && pageable(src)) run_legacy_and_blocking(current_device);
  cudaemu::enqueue(nullptr, copy_op(dst, src, count));
  if (!to_device || (!pageable(src) && !is_device(src))) run_legacy_and_blocking(current_device);
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

// ---- streams and events -----------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  auto* s = new CUstream_st();  // owned by the handle until cudaStreamDestroy
  s->device = current_device;
  s->blocking = (flags & cudaStreamNonBlocking) == 0;
  st.add(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr || s->legacy) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  run_all(s);  // queued work still completes
  std::erase(st.streams, s);
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  if (s->legacy) {
    run_legacy_and_blocking(s->device);
  } else {
    run_all(s);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  // Work runs only when waited for: a query answers "not ready" while any is queued.
  return s->pending.empty() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return fail(cudaErrorInvalidValue);
  auto* e = new CUevent_st();  // owned by the handle until cudaEventDestroy
  e->state->timing = (flags & cudaEventDisableTiming) == 0;
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  delete event;  // queued records keep the state alive
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  // Events inside a capture (a graph's fork and join) are not emulated: refused, so a
  // test that would need them says so instead of passing without them.
  if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  std::shared_ptr<EventState> es = event->state;
  es->reached = false;
  if (const cudaError_t e = cudaemu::enqueue(stream,
                                             [es] {
                                               es->when = Clock::now();
                                               es->reached = true;
                                             });
      e != cudaSuccess) {
    return e;
  }
  es->stream = s->id;
  es->seq = s->enqueued;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const std::shared_ptr<EventState>& es = event->state;
  if (es->stream != 0) run_until(es->stream, es->seq);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const EventState& es = *event->state;
  return es.stream == 0 || es.reached ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (event == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const EventState& es = *event->state;
  if (CUstream_st* s = resolve(stream); s != nullptr && capturing(s)) {
    return fail(cudaErrorStreamCaptureIsolation);  // an event recorded outside the capture
  }
  if (es.stream == 0) return cudaSuccess;  // never recorded: nothing to wait for
  const std::uint64_t source = es.stream;
  const std::uint64_t upto = es.seq;
  return cudaemu::enqueue(stream, [source, upto] { run_until(source, upto); });
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const EventState& a = *start->state;
  const EventState& b = *end->state;
  if (!a.timing || !b.timing) return fail(cudaErrorInvalidResourceHandle);
  if (!a.reached || !b.reached) return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b.when - a.when).count();
  return cudaSuccess;
}

// ---- stream capture and graphs ------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (s->legacy) return fail(cudaErrorStreamCaptureImplicit);  // CUDA refuses the legacy stream
  if (s->capture != nullptr) return fail(cudaErrorIllegalState);
  run_all(s);  // what was queued before the capture is not part of it
  s->capture = new CUgraph_st();
  s->capture_mode = mode;
  s->capture_invalidated = false;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (s->capture == nullptr) return fail(cudaErrorIllegalState);
  std::unique_ptr<CUgraph_st> captured(std::exchange(s->capture, nullptr));
  *graph = nullptr;
  if (s->capture_invalidated) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = captured.release();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  *status = s->capture == nullptr    ? cudaStreamCaptureStatusNone
            : s->capture_invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long /*flags*/) {
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  for (const std::function<void()>& op : exec->ops) {
    if (const cudaError_t e = cudaemu::enqueue(stream, op); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;  // queued launches hold copies of its ops
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
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

}  // extern "C"

// ---- the driver entry point concord fetches -----------------------------------------

namespace {

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

extern "C" cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn,
                                                        unsigned int /*version*/,
                                                        unsigned long long /*flags*/,
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
