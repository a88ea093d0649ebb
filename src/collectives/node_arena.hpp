// The shared-memory arena of a communicator's node, made on first use.
#pragma once

#include "core/communicator_state.hpp"
#include "transport/shared_arena.hpp"

namespace concord::detail {

// Collective over the whole communicator the first time (every rank must call
// it in the same collective): each node sets up its segment and all ranks agree
// whether every node succeeded. Returns this rank's arena, or null when this
// rank is alone on its node, shared memory is off (CONCORD_SHM=0) or set-up
// failed somewhere (then a warning says why, once, and state.arena_everywhere
// is false on every rank so they all fall back alike).
SharedArena* node_arena(const CommunicatorState& state);

}  // namespace concord::detail
