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

// How single-copy rounds reach a peer's buffer: read where it lies (the peer's
// shared heap, SharedArena::peer_view), a result written straight into the
// peer's output there, or copied out of the peer's process (read_peer).
enum class PeerAccess {
  ReadInPlace,
  WrittenInPlace,
  Copied,
};

// One relaxed atomic increment per access (a peer's part of a round).
void count_peer_access(PeerAccess access);
std::uint64_t peer_access_count(PeerAccess access);

}  // namespace concord::detail
