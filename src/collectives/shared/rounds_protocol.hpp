// What the files of SharedRounds (rounds.hpp) share and nothing else needs: the
// counter protocol written out once, the board where single-copy rounds publish their
// buffers' addresses, and the source list of one reduce_many call.
#pragma once

#include "collectives/shared/message_view.hpp"
#include "transport/shared_arena.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace concord::detail::shm_rounds {

// The counter protocol of shared/rounds.hpp, written here once: what a rank's
// progress counter says after each step of a round.
enum class Step : std::uint64_t {
  InputsReady = 1,   // my inputs for the round are in my input region
  PieceReduced = 2,  // my reduced piece is in my result region
  Done = 3,          // I have finished reading everyone's regions of the round
};
constexpr std::uint64_t kStepsPerRound = 3;

inline std::uint64_t counter(std::uint64_t round, Step step) {
  return kStepsPerRound * round + static_cast<std::uint64_t>(step);
}

inline int input_region(std::uint64_t round) {
  return static_cast<int>(round % 2);
}
inline int result_region(std::uint64_t round) {
  return 2 + static_cast<int>(round % 2);
}

// The source pointers of one reduce_many call (one per rank of the arena): on
// the stack up to kInlineSources ranks, so the small-message path neither
// allocates nor looks up a thread-local; else in a vector kept per thread.
class SourceList {
 public:
  explicit SourceList(std::size_t n) : data_(n <= kInlineSources ? inline_.data() : spill(n)) {}
  SourceList(const SourceList&) = delete;
  SourceList& operator=(const SourceList&) = delete;

  const void*& operator[](std::size_t i) { return data_[i]; }
  const void* operator[](std::size_t i) const { return data_[i]; }
  const void* const* data() const { return data_; }

 private:
  static constexpr std::size_t kInlineSources = 16;
  static const void** spill(std::size_t n) {
    thread_local std::vector<const void*> sources;
    if (sources.size() < n) sources.resize(n);
    return sources.data();
  }

  std::array<const void*, kInlineSources> inline_;  // written before it is read
  const void** data_;
};

// Single-copy rounds: where a rank's buffers lie, in its input region of the round.
// A contiguous message gives src and dst; a scattered one (reduced in place) its
// table of spans instead, which peers read once per call (rounds_scattered.cpp).
struct BufferAddresses {
  const std::byte* src;
  std::byte* dst;
  const TensorSpan* spans;
  std::size_t span_count;
};

inline const BufferAddresses& addresses_of(const SharedArena& arena, int owner,
                                           std::uint64_t round) {
  return *reinterpret_cast<const BufferAddresses*>(arena.region(owner, input_region(round)));
}

}  // namespace concord::detail::shm_rounds
