// The emulator's process state and its streams' queues (state.hpp), and the
// queueing that code compiled for the emulator calls (emulator.hpp).
//
// Environment: CUDAEMU_DEVICES (default 1) devices, all of one "physical" GPU
// model that every process of the machine sees alike (same UUIDs), so ranks that
// pick the same ordinal share a GPU as far as concord can tell.
#include "cudaemu/state.hpp"

#include "cudaemu/emulator.hpp"

#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>
#include <utility>

namespace cudaemu::detail {

DeviceAddressSpace::DeviceAddressSpace() {
  void* r = mmap(nullptr, kBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r != MAP_FAILED) free_[reinterpret_cast<std::uintptr_t>(r)] = kBytes;
}

std::byte* DeviceAddressSpace::take(std::size_t bytes) {
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

void DeviceAddressSpace::give(std::byte* p, std::size_t bytes) {
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

void State::add(CUstream_st* s) {
  s->id = next_id++;
  streams.push_back(s);
}

CUstream_st* State::by_id(std::uint64_t id) const {
  for (CUstream_st* s : streams) {
    if (s->id == id) return s;
  }
  return nullptr;
}

State& state() {
  static State* s = [] {
    auto* st = new State();  // never destroyed: static destructors may still call in
    if (const char* v = std::getenv("CUDAEMU_DEVICES")) st->devices = std::max(0, std::atoi(v));
    if (const char* v = std::getenv("CUDAEMU_DEVICE_MEMORY_BYTES")) {
      st->device_memory_bytes = std::strtoull(v, nullptr, 10);
    }
    st->device_memory_used.assign(static_cast<std::size_t>(st->devices), 0);
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

namespace {
thread_local int thread_device = 0;
thread_local cudaError_t last_error = cudaSuccess;
}  // namespace

int current_device() {
  return thread_device;
}
void set_current_device(int device) {
  thread_device = device;
}
cudaError_t take_last_error() {
  return std::exchange(last_error, cudaSuccess);
}
cudaError_t peek_last_error() {
  return last_error;
}
cudaError_t fail(cudaError_t error) {
  last_error = error;
  return error;
}

// ---- streams --------------------------------------------------------------------

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
    if (thread_device >= st.devices) return nullptr;
    return st.legacy[static_cast<std::size_t>(thread_device)].get();
  }
  for (CUstream_st* s : st.streams) {
    if (s == stream) return s;
  }
  return nullptr;
}

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

bool capturing(CUstream_st* s) {
  if (s->capture == nullptr) return false;
  s->capture_invalidated = true;
  return true;
}

namespace {

void push(CUstream_st* s, std::function<void()> op) {
  s->pending.push_back(std::move(op));
  ++s->enqueued;
}

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

}  // namespace cudaemu::detail

namespace cudaemu {

cudaError_t enqueue(cudaStream_t stream, std::function<void()> op) {
  using namespace detail;
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
  detail::fail(error);
}

cudaError_t enqueue_kernel(cudaStream_t stream, std::function<void()> grid) {
  int device = 0;
  {
    detail::State& st = detail::state();
    std::lock_guard lock(st.mutex);
    CUstream_st* s = detail::resolve(stream);
    if (s == nullptr) return detail::fail(cudaErrorInvalidResourceHandle);
    device = s->device;
  }
  return enqueue(stream, [device, grid = std::move(grid)] {
    detail::GpuTurn turn(device);
    grid();
  });
}

}  // namespace cudaemu
