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

// How single-copy rounds read a peer's buffer: where it lies (the peer's shared
// heap, SharedArena::peer_view) or copied out of its process (read_peer).
enum class PeerRead {
  InPlace,
  Copied,
};

// One relaxed atomic increment per read (a peer's part of a round).
void count_peer_read(PeerRead read);
std::uint64_t peer_read_count(PeerRead read);

}  // namespace concord::detail
