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
  // Not a third path: messages of either path above whose results went out with
  // streaming stores (SharedLimits::stream_bytes; never for Avg).
  StreamedOutput,
};

// One relaxed atomic increment per message (not per round).
void count_shm_path(ShmPath path);
std::uint64_t shm_path_count(ShmPath path);

// How single-copy rounds reach a peer's buffers: its input read where it lies
// (the peer's shared heap, SharedArena::peer_view) or copied out of its process
// (read_peer); a reduced piece written into the peer's output where it lies; a
// reduced piece fetched from its owner's output, in place or copied.
enum class PeerAccess {
  InputInPlace,
  InputCopied,
  ResultWritten,
  ResultFetchedInPlace,
  ResultFetchedCopied,
};

// One relaxed atomic increment per access (a peer's part of a round).
void count_peer_access(PeerAccess access);
std::uint64_t peer_access_count(PeerAccess access);

}  // namespace concord::detail
