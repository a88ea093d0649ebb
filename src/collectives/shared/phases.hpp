// Where the shared-memory allreduce spends its time, for measurement only.
//
// With CONCORD_SHM_PHASE_TIMES=1 each SharedRounds::allreduce round adds the time
// of its steps to a per-thread total; concord-bench prints them per size. Off
// (the default) a round pays one test of a cached flag per step and never reads
// the clock.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace concord::detail {

enum class ShmPhase : std::size_t {
  WaitSlot,     // waiting for peers to finish reading the buffers of round r-2
  CopyIn,       // copying the peers' pieces of my input into my input region
  WaitInputs,   // waiting for every peer's inputs
  Reduce,       // reducing my piece (own input + peers' regions) into my result region
  WaitReduced,  // waiting for every peer's reduced piece
  CopyOut,      // copying every reduced piece into my output
  Count
};
inline constexpr std::size_t kShmPhases = static_cast<std::size_t>(ShmPhase::Count);
std::string_view shm_phase_name(ShmPhase phase);

struct ShmPhaseTotals {
  std::array<double, kShmPhases> seconds{};
  std::uint64_t rounds = 0;
};

// True when CONCORD_SHM_PHASE_TIMES=1 (read once).
bool shm_phase_timing();
// This thread's totals since the last reset.
ShmPhaseTotals& shm_phase_totals();

// Laps of one round: each lap() books the time since the previous one.
class ShmPhaseClock {
 public:
  ShmPhaseClock() : on_(shm_phase_timing()) {
    if (on_) last_ = std::chrono::steady_clock::now();
  }
  void lap(ShmPhase phase) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    shm_phase_totals().seconds[static_cast<std::size_t>(phase)] +=
        std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  void end_round() {
    if (on_) ++shm_phase_totals().rounds;
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace concord::detail
