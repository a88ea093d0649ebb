#include "transport/cuda_ipc_arena.hpp"

#include "core/agreement.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstring>

namespace concord::detail {
namespace {

// What each rank tells the others.
struct Exported {
  cudaIpcMemHandle_t handle{};
  int device = -1;
  int ok = 0;
  std::array<char, 160> why{};  // the failure, when !ok
};

void set_why(Exported& e, const std::string& text) {
  std::strncpy(e.why.data(), text.c_str(), e.why.size() - 1);
}

}  // namespace

std::unique_ptr<CudaIpcArena> CudaIpcArena::create(MPI_Comm local, const Shape& shape,
                                                   int world_rank, std::string* why,
                                                   const SetupWait& wait) {
  std::unique_ptr<CudaIpcArena> arena(new CudaIpcArena());
  // The counters first: a ShmArena throws on every rank of `local` alike.
  arena->counters_ = ShmArena::create(local, 64, 0, world_rank, wait);  // counters only: no heap
  arena->counters_->watch_abort(wait.abort);
  const int me = arena->counters_->rank();
  const int ranks = arena->counters_->size();
  arena->region_bytes_ = shape.region_bytes;
  arena->header_bytes_ = (shape.header_bytes + 255) / 256 * 256;

  Exported mine;
  try {
    arena->device_ = cuda::current_device();
    mine.device = arena->device_;
    arena->own_.reserve(arena->header_bytes_ +
                        static_cast<std::size_t>(shape.regions) * shape.region_bytes);
    if (arena->header_bytes_ > 0) {
      // Zero before any peer can write into it: every rank does this before the
      // exchange below, which no rank leaves before all have entered it.
      cuda::check(cudaMemset(arena->own_.get(), 0, arena->header_bytes_), "cudaMemset", world_rank);
      cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", world_rank);
    }
    cuda::check(cudaIpcGetMemHandle(&mine.handle, arena->own_.get()), "cudaIpcGetMemHandle",
                world_rank);
    mine.ok = 1;
  } catch (const Error& e) {
    set_why(mine, e.what());
  }
  const std::vector<Exported> all = gather_over_ranks(local, mine, world_rank, wait);
  for (const Exported& e : all) {
    if (e.ok == 0) {
      if (why != nullptr) *why = e.why.data();
      return nullptr;
    }
  }

  // Map the peers' blocks. Ranks on the same device map it too: IPC is the only
  // way into another process's allocation.
  arena->bases_.assign(static_cast<std::size_t>(ranks), nullptr);
  std::string failure;
  for (int peer = 0; peer < ranks && failure.empty(); ++peer) {
    const Exported& e = all[static_cast<std::size_t>(peer)];
    if (peer == me) {
      arena->bases_[static_cast<std::size_t>(peer)] = arena->own_.get();
      continue;
    }
    if (e.device != arena->device_) {
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, arena->device_, e.device) != cudaSuccess || can == 0) {
        cudaGetLastError();
        failure = fmt::format("concord: rank {}: GPU {} cannot access GPU {} of a local peer",
                              world_rank, arena->device_, e.device);
        break;
      }
    }
    void* p = nullptr;
    const cudaError_t rc = cudaIpcOpenMemHandle(&p, e.handle, cudaIpcMemLazyEnablePeerAccess);
    if (rc != cudaSuccess) {
      cudaGetLastError();
      failure = fmt::format("concord: rank {}: cudaIpcOpenMemHandle of local rank {}: {}",
                            world_rank, peer, cudaGetErrorString(rc));
      break;
    }
    arena->opened_.push_back(static_cast<std::byte*>(p));
    arena->bases_[static_cast<std::size_t>(peer)] = static_cast<std::byte*>(p);
  }
  if (!all_ranks_ok(local, failure.empty(), world_rank, wait)) {
    if (why != nullptr) {
      *why = failure.empty() ? "CUDA IPC failed on another rank of this node" : failure;
    }
    return nullptr;  // the destructor closes what was opened
  }
  return arena;
}

CudaIpcArena::~CudaIpcArena() {
  // Freeing an exported allocation that a peer still has mapped is undefined, and
  // a peer may still be reading this rank's regions (a rank leaves a collective
  // once its own last step is done). So: close the peers' mappings (this rank's
  // reads ended with its last fence), tell the peers with one more counter step,
  // and free this rank's block only once every peer has said the same. Bounded:
  // at exit a peer may be gone; then the block is left to the process's end.
  if (!counters_) return;  // create() failed before anything was allocated
  int previous = -1;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                        cudaSetDevice(device_) == cudaSuccess;
  for (std::byte* p : opened_) cudaIpcCloseMemHandle(p);
  const std::uint64_t closed = counters_->published() + 1;
  counters_->publish(closed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool all_closed = true;
  for (int peer = 0; peer < counters_->size(); ++peer) {
    if (peer != counters_->rank())
      all_closed = counters_->wait_until(peer, closed, deadline) && all_closed;
  }
  if (!all_closed) {
    own_.leak();
  } else {
    own_ = cuda::DeviceBuffer();  // freed here, with device_ current
  }
  if (switched) cudaSetDevice(previous);
  cudaGetLastError();  // nothing here may leave an error for the next call to find
}

}  // namespace concord::detail
