#include "collectives/shared/phases.hpp"

#include "core/config.hpp"

namespace concord::detail {

std::string_view shm_phase_name(ShmPhase phase) {
  switch (phase) {
    case ShmPhase::WaitSlot:
      return "wait-slot";
    case ShmPhase::CopyIn:
      return "copy-in";
    case ShmPhase::WaitInputs:
      return "wait-inputs";
    case ShmPhase::Reduce:
      return "reduce";
    case ShmPhase::WaitReduced:
      return "wait-reduced";
    case ShmPhase::CopyOut:
      return "copy-out";
    case ShmPhase::Count:
      break;
  }
  return "?";
}

bool shm_phase_timing() {
  static const bool on = config().shm_phase_times;
  return on;
}

ShmPhaseTotals& shm_phase_totals() {
  thread_local ShmPhaseTotals totals;
  return totals;
}

}  // namespace concord::detail
