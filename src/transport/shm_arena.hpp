// A SharedArena over one POSIX shared-memory segment per node and communicator.
#pragma once

#include "core/abort_signal.hpp"
#include "core/agreement.hpp"
#include "transport/heap_ranges.hpp"
#include "transport/shared_arena.hpp"

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace concord::detail {

class ShmArena final : public SharedArena {
 public:
  // Collective over `local`, the ranks of one node: local rank 0 creates the
  // segment, the others map it, and it is unlinked as soon as all have, so no
  // /dev/shm entry outlives the set-up, whatever happens to the processes later.
  // Throws Error(SystemError) on every rank of `local` if any rank fails.
  // `heap_bytes`: each rank's shared heap (0: none), address space only until
  // heap_allocate() reserves part of it. Local rank 0's region and heap sizes
  // are everyone's. `world_rank` only labels error messages. Its collectives
  // wait as `wait` says (a rank that never comes: Error(Timeout); an abort:
  // Error(Shutdown)).
  static std::unique_ptr<ShmArena> create(MPI_Comm local, std::size_t region_bytes,
                                          std::size_t heap_bytes, int world_rank,
                                          const SetupWait& wait = {});

  ~ShmArena() override;
  ShmArena(const ShmArena&) = delete;
  ShmArena& operator=(const ShmArena&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::byte* region(int owner, int index) const override;
  std::size_t region_bytes() const override { return region_bytes_; }
  std::byte* board(int owner) const override;
  void publish(std::uint64_t value) override;
  std::uint64_t published() const override;
  void wait_for(int peer, std::uint64_t value) const override;
  bool wait_before(int peer, std::uint64_t value,
                   std::chrono::steady_clock::time_point deadline) const override;
  void poison() override;
  // wait_for, giving up at `deadline`: false when the peer's counter had not
  // reached `value` by then (a peer that is gone, at teardown), was poisoned, or
  // this rank's communicator was aborted (watch_abort).
  bool wait_until(int peer, std::uint64_t value,
                  std::chrono::steady_clock::time_point deadline) const;

  // Collective over `local` (the ranks that made the arena): tries single-copy
  // reads (process_vm_readv) from every rank to every other. Returns "" where
  // this rank's reads worked, else why not; the caller agrees on the outcome and
  // calls set_peer_reads(true) on every rank or on none. Its barrier waits as
  // `wait` says.
  std::string probe_peer_reads(MPI_Comm local, const SetupWait& wait = {});
  void set_peer_reads(bool on) { peer_reads_ = on; }
  // The communicator's abort flag (Communicator::abort): wait_for() gives up
  // once it is raised, with ErrorCode::Shutdown. Null (the default): none.
  void watch_abort(const AbortSignal* abort) { abort_ = abort; }
  bool can_read_peer() const override { return peer_reads_; }
  void read_peer(int peer, void* to, const void* from, std::size_t bytes) const override;

  std::byte* heap_allocate(std::size_t bytes) override;
  bool heap_free(void* p) noexcept override;
  std::byte* peer_view(int peer, const void* from, std::size_t bytes) const override;

 private:
  struct Layout;
  ShmArena(std::byte* base, int fd, const Layout& layout, int rank, int size, int world_rank);
  std::uint64_t* counter(int owner) const;
  [[noreturn]] void throw_poisoned(int peer) const;  // wait_for, on a poisoned counter
  // The one wait on a peer's counter that wait_for, wait_before and wait_until read
  // their own ways: how it ended.
  enum class WaitEnd { Reached, Deadline, Poisoned, Aborted };
  WaitEnd wait_counter(int peer, std::uint64_t value,
                       std::chrono::steady_clock::time_point deadline) const;
  // Beside the counter, on its second line: the owner's pid and the address of
  // its probe word, for probe_peer_reads and read_peer, and where its heap
  // lies in its own address space, for peer_view.
  struct PeerIdentity {
    std::int64_t pid;
    std::uint64_t probe_address;
    std::uint64_t heap_address;
  };
  PeerIdentity* identity(int owner) const;
  // `owner`'s heap: where it starts in the segment, and as this rank maps it.
  std::size_t heap_offset(int owner) const;
  std::byte* heap(int owner) const;

  std::byte* base_;
  std::size_t mapped_bytes_;
  int fd_;  // kept open: heap_allocate reserves the heap's pages through it
  int rank_;
  int size_;
  int world_rank_;  // labels errors
  std::size_t region_bytes_;
  std::size_t slot_bytes_;
  std::size_t heaps_at_;  // offset of rank 0's heap in the segment
  std::size_t heap_bytes_;
  bool peer_reads_ = false;
  const AbortSignal* abort_ = nullptr;
  std::uint64_t probe_ = 0;  // read by peers in probe_peer_reads
  std::mutex heap_mutex_;    // the heap is handed out from any thread
  HeapRanges heap_ranges_;
};

}  // namespace concord::detail
