// The shared-memory vocabulary algorithms are written in: every rank of a node owns
// a slot of memory that all of them can read, and a progress counter that all of
// them can watch. The arena knows nothing of collectives; what a region holds and
// what a counter value means is the algorithm's business.
#pragma once

#include <concord/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace concord::detail {

class SharedArena {
 public:
  // Regions per slot: two input and two result buffers, so that one round can be
  // filled while peers still read the previous one.
  static constexpr int kRegions = 4;
  // Bytes of each rank's board (below).
  static constexpr std::size_t kBoardBytes = 1024;

  virtual ~SharedArena() = default;

  virtual int rank() const = 0;  // among the ranks sharing the arena
  virtual int size() const = 0;

  // Region `index` of `owner`'s slot: region_bytes() bytes, 64-byte aligned.
  // Everyone may read it; only the owner writes it.
  virtual std::byte* region(int owner, int index) const = 0;
  virtual std::size_t region_bytes() const = 0;

  // `owner`'s board: kBoardBytes, 64-byte aligned, zero when the arena is made,
  // for what a rank tells its peers outside the regions' rounds. Only the owner
  // writes it; a peer may read what the owner wrote before publishing a counter
  // value the peer has since waited for. Null where an arena has none.
  virtual std::byte* board(int /*owner*/) const { return nullptr; }

  // `owner`'s header: a block beside its regions, zero-filled on every rank before
  // the arena is handed out, for state that the owner's peers write into it (the
  // device-synchronised allreduce's flags: collectives/device_peer.hpp). Null where
  // an arena was made without one.
  virtual std::byte* header(int /*owner*/) const { return nullptr; }

  // This rank's progress counter. publish() makes every write this rank did
  // before it visible to a peer whose wait_for() sees the value (release/acquire).
  // Values never decrease.
  virtual void publish(std::uint64_t value) = 0;
  virtual std::uint64_t published() const = 0;
  // Returns once `peer`'s counter is at least `value`: spins briefly, then yields
  // the core, so more ranks than cores still make progress. Throws
  // Error(Timeout) naming the peer where it poisoned its counter first.
  virtual void wait_for(int peer, std::uint64_t value) const = 0;
  // wait_for with a deadline, for a wait outside the rounds that nothing else bounds:
  // false where `peer`'s counter had not reached `value` by `deadline`; throws as
  // wait_for does.
  virtual bool wait_before(int peer, std::uint64_t value,
                           std::chrono::steady_clock::time_point deadline) const = 0;
  // This rank gives up on the arena (its communicator failed: a call timed out).
  // A peer's wait_for() of a value this rank's counter had not reached then
  // throws instead of waiting for ever; values it had reached still count. For
  // good: the counter stays poisoned. Default: nothing (an arena whose waits end
  // by other means).
  virtual void poison() {}

  // Single copy: whether read_peer() works from every rank of the arena to every
  // other (agreed on all of them when the arena was made; false where the
  // kernel refuses it, or it was switched off).
  virtual bool can_read_peer() const { return false; }
  // Copies `bytes` from `from`, an address in `peer`'s own memory (not the
  // arena: a buffer whose address the peer published), to `to` in the caller's.
  // Precondition: can_read_peer(). Throws Error(SystemError) naming the call.
  virtual void read_peer(int /*peer*/, void* /*to*/, const void* /*from*/,
                         std::size_t /*bytes*/) const {
    throw Error(ErrorCode::Internal, -1, "read_peer on an arena without single-copy reads");
  }

  // The shared heap: memory a rank hands out as buffers (heap_allocate) that
  // its peers read where it lies, through their own mapping of it. Null where
  // this arena has none; throws Error where the heap has no free range that
  // large (InvalidArgument) or the memory cannot be reserved (SystemError).
  virtual std::byte* heap_allocate(std::size_t /*bytes*/) { return nullptr; }
  // Gives back a buffer heap_allocate returned; false where `p` is not one
  // (or was given back already).
  virtual bool heap_free(void* /*p*/) noexcept { return false; }
  // Where [from, from + bytes), addresses in `peer`'s own memory (a buffer
  // whose address the peer published), lie in the peer's heap: the same bytes
  // as this rank maps them, to read or write in place. Null otherwise. `peer`
  // may be this rank: whether one of its own buffers is in its heap.
  virtual std::byte* peer_view(int /*peer*/, const void* /*from*/, std::size_t /*bytes*/) const {
    return nullptr;
  }
};

}  // namespace concord::detail
