// The shared-memory vocabulary algorithms are written in: every rank of a node owns
// a slot of memory that all of them can read, and a progress counter that all of
// them can watch. The arena knows nothing of collectives; what a region holds and
// what a counter value means is the algorithm's business.
#pragma once

#include <cstddef>
#include <cstdint>

namespace concord::detail {

class SharedArena {
 public:
  // Regions per slot: two input and two result buffers, so that one round can be
  // filled while peers still read the previous one.
  static constexpr int kRegions = 4;

  virtual ~SharedArena() = default;

  virtual int rank() const = 0;  // among the ranks sharing the arena
  virtual int size() const = 0;

  // Region `index` of `owner`'s slot: region_bytes() bytes, 64-byte aligned.
  // Everyone may read it; only the owner writes it.
  virtual std::byte* region(int owner, int index) const = 0;
  virtual std::size_t region_bytes() const = 0;

  // This rank's progress counter. publish() makes every write this rank did
  // before it visible to a peer whose wait_for() sees the value (release/acquire).
  // Values never decrease.
  virtual void publish(std::uint64_t value) = 0;
  virtual std::uint64_t published() const = 0;
  // Returns once `peer`'s counter is at least `value`: spins briefly, then yields
  // the core, so more ranks than cores still make progress.
  virtual void wait_for(int peer, std::uint64_t value) const = 0;
};

}  // namespace concord::detail
