// The emulated runtime's process state, seen by its parts: state.cpp (the state,
// streams and their queues), memory.cpp (allocations, copies, IPC), streams.cpp
// (the stream, event and graph calls) and device.cpp (devices and errors).
// Internal to the emulator; code under test sees only the CUDA headers and
// emulator.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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

namespace cudaemu::detail {

using Clock = std::chrono::steady_clock;

struct EventState {
  std::uint64_t stream = 0;  // id of the stream it was last recorded on (0: never)
  std::uint64_t seq = 0;     // the op count it waits for
  bool timing = true;
  Clock::time_point when{};
  bool reached = false;
};

}  // namespace cudaemu::detail

struct CUevent_st {
  std::shared_ptr<cudaemu::detail::EventState> state =
      std::make_shared<cudaemu::detail::EventState>();
};

namespace cudaemu::detail {

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

// Device addresses come from a reservation of their own, as with CUDA's unified
// addressing: an address that was once host memory never becomes device memory
// (concord's pointer cache relies on that), and freed device ranges are handed
// out again as device memory only. First fit over the free ranges.
class DeviceAddressSpace {
 public:
  static constexpr std::size_t kBytes = std::size_t{64} << 30;

  DeviceAddressSpace();
  // `bytes` (a page multiple) of inaccessible addresses, or nullptr.
  std::byte* take(std::size_t bytes);
  // Makes [p, p + bytes) inaccessible again (dropping what was mapped there) and free.
  void give(std::byte* p, std::size_t bytes);

 private:
  std::map<std::uintptr_t, std::size_t> free_;  // start -> bytes
};

// Everything below is read and written under `mutex` (recursive: a queued op that
// runs under it may queue or wait in turn).
struct State {
  std::recursive_mutex mutex;
  DeviceAddressSpace device_space;
  std::map<std::uintptr_t, Allocation> allocations;  // by base
  std::vector<std::unique_ptr<CUstream_st>> legacy;  // one per device
  std::vector<CUstream_st*> streams;                 // every live stream, legacy included
  int devices = 1;
  // Each device's memory (CUDAEMU_DEVICE_MEMORY_BYTES, default the whole device
  // address space) and what this process's live cudaMalloc allocations take of
  // it: cudaMalloc fails beyond it, as on a full GPU. Counted per process.
  std::size_t device_memory_bytes = DeviceAddressSpace::kBytes;
  std::vector<std::size_t> device_memory_used;  // by device
  std::uint64_t next_id = 1;
  std::uint64_t allocation_serials = 0;

  void add(CUstream_st* s);
  CUstream_st* by_id(std::uint64_t id) const;  // nullptr: destroyed, after its work had run
};

// The process's state, made on first use (CUDAEMU_DEVICES devices) and never destroyed.
State& state();

// The calling thread's device (cudaSetDevice) and last error (cudaGetLastError).
int current_device();
void set_current_device(int device);
cudaError_t take_last_error();
cudaError_t peek_last_error();
// Records `error` as the thread's last error and returns it.
cudaError_t fail(cudaError_t error);

// ---- streams (state.cpp) -------------------------------------------------------------

// Runs `stream`'s ops until `upto` of them have run. Ops may run other streams'
// (event waits); an op is popped before it runs, so re-entry continues in order.
void run_until(CUstream_st* stream, std::uint64_t upto);
void run_until(std::uint64_t id, std::uint64_t upto);  // by id: nothing if destroyed
void run_all(CUstream_st* stream);
// The live stream a handle names (nullptr / cudaStreamLegacy: the current device's
// legacy stream), or nullptr.
CUstream_st* resolve(cudaStream_t stream);
// The device's legacy stream and its blocking streams: what a synchronous call
// on the legacy stream waits for.
void run_legacy_and_blocking(int device);
void run_device(int device);

// What CUDA refuses while a stream of the process captures in global mode (the
// default): calls that synchronise or allocate ("potentially unsafe" calls). They
// fail with cudaErrorStreamCaptureUnsupported and invalidate those captures, so code
// that would break a capture on a GPU breaks it here too. True when one did.
bool capture_forbids();
// A capturing stream asked to synchronise: refused, and its capture invalidated.
bool capturing(CUstream_st* s);

// ---- memory (memory.cpp) -------------------------------------------------------------

// The allocation holding [p, p + bytes), or nullptr when p lies in none; *partial
// is set when p is inside one but the range runs past its end.
const Allocation* find(const void* p, std::size_t bytes = 1, bool* partial = nullptr);

}  // namespace cudaemu::detail
