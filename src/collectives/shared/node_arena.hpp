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

// Each rank's shared heap where CONCORD_SHM_HEAP_BYTES is unset: 512 MiB, less
// on big nodes, so that every process maps at most 16 GiB of heaps (its own and
// its peers'): 256 MiB at 64 ranks a node, 128 MiB at 128.
std::size_t default_heap_bytes(int local_ranks);

}  // namespace concord::detail
