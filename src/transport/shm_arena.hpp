// A SharedArena over one POSIX shared-memory segment per node and communicator.
#pragma once

#include "transport/shared_arena.hpp"

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <memory>

namespace concord::detail {

class ShmArena final : public SharedArena {
 public:
  // Collective over `local`, the ranks of one node: local rank 0 creates the
  // segment, the others map it, and it is unlinked as soon as all have, so no
  // /dev/shm entry outlives the set-up, whatever happens to the processes later.
  // Throws Error(SystemError) on every rank of `local` if any rank fails.
  // `world_rank` only labels error messages.
  static std::unique_ptr<ShmArena> create(MPI_Comm local, std::size_t region_bytes, int world_rank);

  ~ShmArena() override;
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::byte* region(int owner, int index) const override;
  std::size_t region_bytes() const override { return region_bytes_; }
  void publish(std::uint64_t value) override;
  std::uint64_t published() const override;
  void wait_for(int peer, std::uint64_t value) const override;
  // wait_for, giving up at `deadline`: false when the peer's counter had not
  // reached `value` by then (a peer that is gone, at teardown).
  bool wait_until(int peer, std::uint64_t value,
                  std::chrono::steady_clock::time_point deadline) const;

 private:
  ShmArena(std::byte* base, std::size_t mapped_bytes, int rank, int size, std::size_t region_bytes);
  std::uint64_t* counter(int owner) const;

  std::byte* base_;
  std::size_t mapped_bytes_;
  int rank_;
  int size_;
  std::size_t region_bytes_;
  std::size_t slot_bytes_;
};

}  // namespace concord::detail
