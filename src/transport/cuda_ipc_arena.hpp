// A SharedArena whose regions are device memory: each rank's regions (and an
// optional header before them) live in one cudaMalloc'd block on its GPU, which
// the other ranks of the node map through CUDA IPC. Ranks may share a GPU (IPC within one device
// works across processes) or use different GPUs that can access each other (peer access). The
// progress counters are host shared memory (a ShmArena), so waiting costs no CUDA call; writers
// fence their stream before publishing (the CUDA executor does).
#pragma once

#include "cuda/cuda_runtime.hpp"
#include "transport/shared_arena.hpp"
#include "transport/shm_arena.hpp"

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace concord::detail {

class CudaIpcArena final : public SharedArena {
 public:
  // The memory each rank maps: a header of `header_bytes` (0: none), then `regions`
  // regions of `region_bytes`.
  struct Shape {
    std::size_t region_bytes = 0;
    int regions = kRegions;
    std::size_t header_bytes = 0;
  };
  // Collective over `local` (the ranks of one node), on each rank's current
  // device. Returns null on every rank of `local` when any of them cannot take
  // part (IPC unsupported, no peer access between two GPUs, out of memory), with
  // the first reason in `why`. Every rank's header is zero when any rank returns.
  // Its exchanges wait as `wait` says (a rank that never comes: Error(Timeout)),
  // and its counters' waits give up once `wait.abort` is raised (watch_abort).
  static std::unique_ptr<CudaIpcArena> create(MPI_Comm local, const Shape& shape, int world_rank,
                                              std::string* why, const SetupWait& wait = {});
  static std::unique_ptr<CudaIpcArena> create(MPI_Comm local, std::size_t region_bytes,
                                              int world_rank, std::string* why,
                                              const SetupWait& wait = {}) {
    return create(local, Shape{region_bytes, kRegions, 0}, world_rank, why, wait);
  }
  ~CudaIpcArena() override;
  CudaIpcArena(const CudaIpcArena&) = delete;
  CudaIpcArena& operator=(const CudaIpcArena&) = delete;

  int rank() const override { return counters_->rank(); }
  int size() const override { return counters_->size(); }
  std::byte* region(int owner, int index) const override {
    return bases_[static_cast<std::size_t>(owner)] + header_bytes_ +
           static_cast<std::size_t>(index) * region_bytes_;
  }
  std::size_t region_bytes() const override { return region_bytes_; }
  std::byte* header(int owner) const override {
    return header_bytes_ == 0 ? nullptr : bases_[static_cast<std::size_t>(owner)];
  }
  // The boards and counters are host shared memory, the counters' arena's.
  std::byte* board(int owner) const override { return counters_->board(owner); }
  void publish(std::uint64_t value) override { counters_->publish(value); }
  std::uint64_t published() const override { return counters_->published(); }
  void wait_for(int peer, std::uint64_t value) const override { counters_->wait_for(peer, value); }
  bool wait_before(int peer, std::uint64_t value,
                   std::chrono::steady_clock::time_point deadline) const override {
    return counters_->wait_before(peer, value, deadline);
  }
  // The IPC rounds meet on the counters: a failed communicator poisons them, as
  // the host arena's, so that a peer waiting on this rank fails too.
  void poison() override { counters_->poison(); }

  int device() const { return device_; }

 private:
  CudaIpcArena() = default;

  std::unique_ptr<ShmArena> counters_;
  cuda::DeviceBuffer own_;          // this rank's regions
  std::vector<std::byte*> bases_;   // every rank's regions, own_ at this rank's place
  std::vector<std::byte*> opened_;  // peers' mappings, closed by the destructor
  std::size_t region_bytes_ = 0;
  std::size_t header_bytes_ = 0;  // rounded up to cudaMalloc's 256-byte alignment
  int device_ = 0;
};

}  // namespace concord::detail
