#include "transport/shm_arena.hpp"

#include "core/agreement.hpp"
#include "core/mpi_check.hpp"
#include "core/mpi_wait.hpp"
#include "transport/peer_reads.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace concord::detail {
namespace {

// The counter gets a line pair of its own: peers poll it while its owner writes
// its regions, and the adjacent-line prefetcher works in 128-byte pairs.
constexpr std::size_t kCounterBytes = 128;
constexpr std::size_t kAlign = 64;
// A slot: the counter's line pair, the board, then the regions from a page
// boundary on (each region on one, with the default page-multiple region size;
// hardware prefetchers stop at page boundaries).
constexpr std::size_t kPage = 4096;

constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

constexpr std::size_t kHeaderBytes = round_up(kCounterBytes + SharedArena::kBoardBytes, kPage);
static_assert(kHeaderBytes % kAlign == 0);

// The heaps start on a 2 MiB boundary of the segment and are multiples of it,
// where huge pages could back them.
constexpr std::size_t kHeapAlign = 2u << 20;

// What local rank 0 tells the others about the segment it created.
struct SetupMessage {
  std::uint64_t region_bytes = 0;  // local rank 0's choices are everyone's
  std::uint64_t heap_bytes = 0;
  int error = 0;  // errno of the failed call on rank 0, 0 on success
  char call[32] = {};
  char name[64] = {};
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// A mapping that unmaps itself unless release()d to its final owner.
class Mapping {
 public:
  Mapping() = default;
  ~Mapping() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  bool map(int fd, std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return false;
    base_ = static_cast<std::byte*>(p);
    bytes_ = bytes;
    return true;
  }
  std::byte* release() { return std::exchange(base_, nullptr); }

 private:
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
};

void set_call(SetupMessage& m, const char* call, int error) {
  m.error = error;
  std::snprintf(m.call, sizeof m.call, "%s", call);
}

}  // namespace

// Where everything lies in the segment: every rank's slot, then every rank's heap.
struct ShmArena::Layout {
  Layout(std::size_t region, std::size_t heap, int rank_count)
      : ranks(static_cast<std::size_t>(rank_count)),
        region_bytes(region),
        heap_bytes(round_up(heap, kHeapAlign)),
        slot_bytes(kHeaderBytes + kRegions * region),
        heaps_at(heap_bytes == 0 ? slot_bytes * ranks : round_up(slot_bytes * ranks, kHeapAlign)),
        total(heaps_at + heap_bytes * ranks) {}
  // What is reserved up front: the slots, not the padding before the heaps.
  std::size_t slots_bytes() const { return slot_bytes * ranks; }
  std::size_t ranks;
  std::size_t region_bytes;
  std::size_t heap_bytes;
  std::size_t slot_bytes;
  std::size_t heaps_at;
  std::size_t total;
};

namespace {

// Local rank 0: a fresh segment. The slots are reserved in full so that running
// out of /dev/shm is an error here rather than a SIGBUS on first touch later;
// the heaps only as they are handed out (ShmArena::heap_allocate).
Fd create_segment(SetupMessage& m, std::size_t slots_bytes, std::size_t bytes, Mapping& mapping) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::snprintf(m.name, sizeof m.name, "/concord-%d-%u", static_cast<int>(::getpid()),
                  counter.fetch_add(1));
    Fd fd(::shm_open(m.name, O_CREAT | O_EXCL | O_RDWR, 0600));
    if (fd.get() < 0) {
      if (errno == EEXIST) continue;
      set_call(m, "shm_open", errno);
      return Fd(-1);
    }
    const char* failed = nullptr;
    int error = 0;
    if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
      failed = "ftruncate";
      error = errno;
    } else if (int rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(slots_bytes)); rc != 0) {
      failed = "posix_fallocate";
      error = rc;
    } else if (!mapping.map(fd.get(), bytes)) {
      failed = "mmap";
      error = errno;
    }
    if (failed != nullptr) {
      ::shm_unlink(m.name);
      set_call(m, failed, error);
      return Fd(-1);
    }
    return fd;
  }
  set_call(m, "shm_open", EEXIST);
  return Fd(-1);
}

// Local rank 0's `sent` on every rank of `local`, waited for as `wait` says.
// If that fails, rank 0 unlinks the segment it made (nobody will map it: leave
// nothing in /dev/shm).
SetupMessage broadcast_setup(const SetupMessage& sent, MPI_Comm local, int rank, int world_rank,
                             const SetupWait& wait) {
  try {
    return broadcast_over_ranks(local, sent, world_rank, wait);
  } catch (...) {
    if (rank == 0 && sent.error == 0) ::shm_unlink(sent.name);
    throw;
  }
}

}  // namespace

std::unique_ptr<ShmArena> ShmArena::create(MPI_Comm local, std::size_t region_bytes,
                                           std::size_t heap_bytes, int world_rank,
                                           const SetupWait& wait) {
  int rank = 0;
  int size = 1;
  check_mpi(MPI_Comm_rank(local, &rank), "MPI_Comm_rank", world_rank);
  check_mpi(MPI_Comm_size(local, &size), "MPI_Comm_size", world_rank);
  // At least one 8-byte element per rank, so every rank can own part of a region.
  region_bytes = round_up(std::max(region_bytes, 8 * static_cast<std::size_t>(size)), kAlign);

  SetupMessage sent;
  sent.region_bytes = region_bytes;
  sent.heap_bytes = heap_bytes;
  Mapping mapping;
  Fd fd(-1);
  if (rank == 0) {
    const Layout planned(region_bytes, heap_bytes, size);
    fd = create_segment(sent, planned.slots_bytes(), planned.total, mapping);
  }
  const SetupMessage message = broadcast_setup(sent, local, rank, world_rank, wait);
  const Layout layout(message.region_bytes, message.heap_bytes, size);
  const std::size_t total = layout.total;
  // The hint where the heaps may be what did not fit (address space, /dev/shm).
  const std::string advice =
      layout.heap_bytes == 0
          ? "set CONCORD_SHM=0 to run without shared memory"
          : fmt::format(
                "{} bytes of it are the ranks' heaps: set CONCORD_SHM_HEAP_BYTES lower, "
                "or CONCORD_SHM=0 to run without shared memory",
                total - layout.slots_bytes());
  if (message.error != 0) {
    throw Error(
        ErrorCode::SystemError, world_rank,
        fmt::format("shared-memory transport: {} of {} ({} bytes) failed on local rank 0: "
                    "{} ({})",
                    message.call, message.name, total, std::strerror(message.error), advice));
  }

  // The others map it; whatever happens, rank 0 unlinks it once all have tried.
  int error = 0;
  const char* failed_call = "";
  if (rank != 0) {
    fd = Fd(::shm_open(message.name, O_RDWR, 0));
    if (fd.get() < 0) {
      error = errno;
      failed_call = "shm_open";
    } else if (!mapping.map(fd.get(), total)) {
      error = errno;
      failed_call = "mmap";
    }
  }
  bool all_mapped = false;
  try {
    all_mapped = all_ranks_ok(local, error == 0, world_rank, wait);
  } catch (...) {
    if (rank == 0) ::shm_unlink(message.name);
    throw;
  }
  if (rank == 0) ::shm_unlink(message.name);
  if (!all_mapped) {
    throw Error(ErrorCode::SystemError, world_rank,
                error != 0
                    ? fmt::format("shared-memory transport: {} of {} ({} bytes) failed: {} "
                                  "({})",
                                  failed_call, message.name, total, std::strerror(error), advice)
                    : fmt::format("shared-memory transport: another rank of this node "
                                  "could not map {}",
                                  message.name));
  }
  return std::unique_ptr<ShmArena>(
      new ShmArena(mapping.release(), fd.release(), layout, rank, size, world_rank));
}

ShmArena::ShmArena(std::byte* base, int fd, const Layout& layout, int rank, int size,
                   int world_rank)
    : base_(base),
      mapped_bytes_(layout.total),
      fd_(fd),
      rank_(rank),
      size_(size),
      world_rank_(world_rank),
      region_bytes_(layout.region_bytes),
      slot_bytes_(layout.slot_bytes),
      heaps_at_(layout.heaps_at),
      heap_bytes_(layout.heap_bytes),
      heap_ranges_(layout.heap_bytes) {
  // Read by peers only after a counter value this rank publishes later.
  identity(rank_)->heap_address = reinterpret_cast<std::uint64_t>(heap(rank_));
}

ShmArena::~ShmArena() {
  ::munmap(base_, mapped_bytes_);
  ::close(fd_);
}

std::byte* ShmArena::region(int owner, int index) const {
  return base_ + static_cast<std::size_t>(owner) * slot_bytes_ + kHeaderBytes +
         static_cast<std::size_t>(index) * region_bytes_;
}

std::byte* ShmArena::board(int owner) const {
  return base_ + static_cast<std::size_t>(owner) * slot_bytes_ + kCounterBytes;
}

std::uint64_t* ShmArena::counter(int owner) const {
  return reinterpret_cast<std::uint64_t*>(base_ + static_cast<std::size_t>(owner) * slot_bytes_);
}

ShmArena::PeerIdentity* ShmArena::identity(int owner) const {
  return reinterpret_cast<PeerIdentity*>(base_ + static_cast<std::size_t>(owner) * slot_bytes_ +
                                         kAlign);
}

std::string ShmArena::probe_peer_reads(MPI_Comm local, const SetupWait& wait) {
  constexpr std::uint64_t kProbe = 0x636f6e636f726400;  // "concord\0"
  const pid_t self = ::getpid();
  std::string failure = allow_peer_reads();
  probe_ = kProbe ^ static_cast<std::uint64_t>(self);
  identity(rank_)->pid = self;
  identity(rank_)->probe_address = reinterpret_cast<std::uint64_t>(&probe_);
  // Everyone's identity and ptracer permission are in place before anyone reads.
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibarrier(local, &request), "MPI_Ibarrier", world_rank_);
  wait_for_setup(request, "MPI_Ibarrier", world_rank_, wait);
  for (int peer = 0; peer < size_ && failure.empty(); ++peer) {
    if (peer == rank_) continue;
    const PeerIdentity who = *identity(peer);
    std::uint64_t seen = 0;
    const int error =
        read_process_memory(static_cast<pid_t>(who.pid), &seen,
                            reinterpret_cast<const void*>(who.probe_address), sizeof seen);
    if (error != 0) {
      failure = fmt::format("process_vm_readv from local rank {} (pid {}): {}", peer, who.pid,
                            std::strerror(error));
    } else if (seen != (kProbe ^ static_cast<std::uint64_t>(who.pid))) {
      failure = fmt::format("process_vm_readv from local rank {} read a wrong value", peer);
    }
  }
  return failure;
}

void ShmArena::read_peer(int peer, void* to, const void* from, std::size_t bytes) const {
  if (bytes == 0) return;
  const auto pid = static_cast<pid_t>(identity(peer)->pid);
  if (const int error = read_process_memory(pid, to, from, bytes); error != 0) {
    throw Error(ErrorCode::SystemError, world_rank_,
                fmt::format("single-copy read of {} bytes from local rank {} (process_vm_readv): "
                            "{} (set CONCORD_SHM_CMA=0 to copy through shared memory)",
                            bytes, peer, std::strerror(error)));
  }
}

std::size_t ShmArena::heap_offset(int owner) const {
  return heaps_at_ + static_cast<std::size_t>(owner) * heap_bytes_;
}

std::byte* ShmArena::heap(int owner) const {
  return base_ + heap_offset(owner);
}

std::byte* ShmArena::heap_allocate(std::size_t bytes) {
  if (heap_bytes_ == 0) return nullptr;
  const std::lock_guard lock(heap_mutex_);
  const auto offset = heap_ranges_.take(bytes);
  if (!offset) {
    throw Error(ErrorCode::InvalidArgument, world_rank_,
                fmt::format("shared heap: no free range of {} bytes in this rank's heap ({} of "
                            "{} bytes free, the largest range {}); CONCORD_SHM_HEAP_BYTES sets "
                            "its size (local rank 0's value serves the node)",
                            bytes, heap_ranges_.free_bytes(), heap_ranges_.capacity(),
                            heap_ranges_.largest_free()));
  }
  const std::size_t reserved = HeapRanges::rounded(bytes);
  const auto at = static_cast<off_t>(heap_offset(rank_) + *offset);
  // Reserved now, so that a full /dev/shm is this error and not a SIGBUS on
  // first touch. tmpfs gives up with EINTR when a signal is pending: retry.
  int rc = 0;
  do {
    rc = ::posix_fallocate(fd_, at, static_cast<off_t>(reserved));
  } while (rc == EINTR);
  if (rc != 0) {
    heap_ranges_.give_back(*offset);
    throw Error(ErrorCode::SystemError, world_rank_,
                fmt::format("shared heap: posix_fallocate of {} bytes in the node's /dev/shm "
                            "segment failed: {}",
                            reserved, std::strerror(rc)));
  }
  return heap(rank_) + *offset;
}

bool ShmArena::heap_free(void* p) noexcept {
  auto* at = static_cast<std::byte*>(p);
  std::byte* mine = heap(rank_);
  if (heap_bytes_ == 0 || at < mine || at >= mine + heap_bytes_) return false;
  const auto offset = static_cast<std::size_t>(at - mine);
  const std::lock_guard lock(heap_mutex_);
  const auto bytes = heap_ranges_.give_back(offset);
  if (!bytes) return false;
  // The pages go back to the system; the address range stays this rank's heap.
  // Where that fails they stay reserved until the segment goes: nothing is lost.
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(heap_offset(rank_) + offset), static_cast<off_t>(*bytes));
  return true;
}

std::byte* ShmArena::peer_view(int peer, const void* from, std::size_t bytes) const {
  if (heap_bytes_ == 0) return nullptr;
  const auto start = reinterpret_cast<std::uint64_t>(from);
  const std::uint64_t theirs = identity(peer)->heap_address;
  if (start < theirs) return nullptr;
  const std::uint64_t offset = start - theirs;
  if (offset > heap_bytes_ || bytes > heap_bytes_ - offset) return nullptr;
  return heap(peer) + offset;
}

namespace {
// The top bit of a counter: its owner gave up on the communicator (poison()).
// The bits below keep the last value it published, so waits for values it had
// reached still pass.
constexpr std::uint64_t kPoisoned = std::uint64_t{1} << 63;
}  // namespace

void ShmArena::publish(std::uint64_t value) {
  // Only this rank writes its counter: the bit it may have set stays set.
  std::atomic_ref<std::uint64_t> mine(*counter(rank_));
  mine.store(value | (mine.load(std::memory_order_relaxed) & kPoisoned), std::memory_order_release);
}

std::uint64_t ShmArena::published() const {
  return std::atomic_ref<std::uint64_t>(*counter(rank_)).load(std::memory_order_relaxed) &
         ~kPoisoned;
}

void ShmArena::poison() {
  std::atomic_ref<std::uint64_t>(*counter(rank_)).fetch_or(kPoisoned, std::memory_order_release);
}

void ShmArena::throw_poisoned(int peer) const {
  throw Error(ErrorCode::Timeout, world_rank_,
              fmt::format("shared memory: the node's local rank {} gave up on this communicator "
                          "(a call of its timed out waiting for its peers) before this call's "
                          "data reached it; this call fails, and the communicator has failed",
                          peer));
}

bool ShmArena::wait_until(int peer, std::uint64_t value,
                          std::chrono::steady_clock::time_point deadline) const {
  return wait_counter(peer, value, deadline) == WaitEnd::Reached;
}

void ShmArena::wait_for(int peer, std::uint64_t value) const {
  wait_before(peer, value, std::chrono::steady_clock::time_point::max());
}

bool ShmArena::wait_before(int peer, std::uint64_t value,
                           std::chrono::steady_clock::time_point deadline) const {
  switch (wait_counter(peer, value, deadline)) {
    case WaitEnd::Reached:
      return true;
    case WaitEnd::Deadline:
      return false;
    case WaitEnd::Poisoned:
      throw_poisoned(peer);
    case WaitEnd::Aborted:
      break;
  }
  throw aborted_error(world_rank_, fmt::format("while waiting on the node's local rank {}", peer));
}

ShmArena::WaitEnd ShmArena::wait_counter(int peer, std::uint64_t value,
                                         std::chrono::steady_clock::time_point deadline) const {
  // Spinning is right while the peer runs on another core; once it has taken
  // long enough that the peer is probably descheduled (more ranks than cores),
  // yielding lets it run.
  constexpr int kSpinsBeforeYield = 512;
  std::atomic_ref<std::uint64_t> flag(*counter(peer));
  std::uint64_t v = 0;
  for (int spins = 0; ((v = flag.load(std::memory_order_acquire)) & ~kPoisoned) < value; ++spins) {
    if ((v & kPoisoned) != 0) return WaitEnd::Poisoned;
    if (spins < kSpinsBeforeYield) {
#if defined(__x86_64__)
      _mm_pause();
#endif
      continue;
    }
    // Past the spins a wait is long, and the flag's read costs nothing beside
    // the yield. An aborted rank stops waiting (its peers may be stuck elsewhere).
    if (abort_ != nullptr && abort_->raised()) return WaitEnd::Aborted;
    if (std::chrono::steady_clock::now() >= deadline) return WaitEnd::Deadline;
    sched_yield();
  }
  return WaitEnd::Reached;
}

}  // namespace concord::detail
