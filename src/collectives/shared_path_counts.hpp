// How many shared-memory allreduces of this process took each large-message
// path. Tests read it (through this internal header, not the public API) to
// prove that a configuration meant to cover single-copy reads, or the copy
// fallback, really reached that path instead of passing on another one.
#pragma once

#include <cstdint>

namespace concord::detail {

enum class ShmPath {
  CopyRounds,  // region-sized rounds copied through the arena
  SingleCopy,  // rounds of single-copy reads (cross-memory attach)
};

// One relaxed atomic increment per message (not per round).
void count_shm_path(ShmPath path);
std::uint64_t shm_path_count(ShmPath path);

}  // namespace concord::detail
