#include "collectives/shared/path_counts.hpp"

#include <array>
#include <atomic>
#include <cstddef>

namespace concord::detail {

namespace {

// Process-wide, not per thread: the engine runs collectives on its own thread.
std::array<std::atomic<std::uint64_t>, 3> path_counts{};

std::array<std::atomic<std::uint64_t>, 5> access_counts{};

std::atomic<std::uint64_t>& slot(ShmPath path) {
  return path_counts[static_cast<std::size_t>(path)];
}

}  // namespace

void count_shm_path(ShmPath path) {
  slot(path).fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t shm_path_count(ShmPath path) {
  return slot(path).load(std::memory_order_relaxed);
}

void count_peer_access(PeerAccess access) {
  access_counts[static_cast<std::size_t>(access)].fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t peer_access_count(PeerAccess access) {
  return access_counts[static_cast<std::size_t>(access)].load(std::memory_order_relaxed);
}

}  // namespace concord::detail
