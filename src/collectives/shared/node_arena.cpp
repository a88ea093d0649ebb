#include "collectives/shared/node_arena.hpp"

#include "core/agreement.hpp"
#include "core/config.hpp"
#include "transport/shm_arena.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace concord::detail {

namespace {

// How the set-up's collectives wait: a rank that never comes to its first call
// fails the others at the transport's deadline, and an abort stops them.
SetupWait setup_wait(const CommunicatorState& state) {
  return {"the shared-memory transport's set-up", &state.abort_signal};
}

// Whether every rank of the node wants a setting. Where some do and some do
// not, local rank 0 says so once (`mixed`: what differs and what every rank
// does instead): a setting that differs between ranks is likely a mistake.
bool every_rank_wants(const CommunicatorState& state, bool wanted, std::string_view mixed) {
  MPI_Comm local = state.topology.local.get();
  if (all_ranks_ok(local, wanted, state.rank, setup_wait(state))) return true;
  // Every rank makes this second call too: the first answered alike everywhere.
  const bool none_wanted = all_ranks_ok(local, !wanted, state.rank, setup_wait(state));
  if (!none_wanted && state.topology.local_rank == 0) {
    fmt::print(stderr, "concord: rank {}: {}\n", state.rank, mixed);
  }
  return false;
}

// Single-copy reads between the node's ranks, where every one of them wants
// them (CONCORD_SHM_CMA) and the kernel allows them to every one; else none.
void enable_peer_reads(ShmArena& arena, const CommunicatorState& state) {
  if (!every_rank_wants(state, config().shm_cma,
                        "single-copy reads between ranks (cross-memory attach) are off: "
                        "CONCORD_SHM_CMA=0 on some ranks of this node but not all; copying "
                        "large messages through shared memory instead")) {
    return;
  }
  MPI_Comm local = state.topology.local.get();
  const std::string failure = arena.probe_peer_reads(local, setup_wait(state));
  arena.set_peer_reads(agree_or_fall_back(local, failure, state.rank,
                                          {"single-copy reads between ranks (cross-memory attach)",
                                           "copying large messages through shared memory instead"},
                                          setup_wait(state)));
}

// Local rank 0's heap size serves the node (ShmArena::create); where ranks
// asked for different sizes, local rank 0 says so once.
void warn_if_heap_sizes_differ(const CommunicatorState& state, std::size_t requested) {
  const std::vector<std::uint64_t> all = gather_over_ranks(
      state.topology.local.get(), std::uint64_t{requested}, state.rank, setup_wait(state));
  const auto [least, most] = std::minmax_element(all.begin(), all.end());
  if (*least != *most && state.topology.local_rank == 0) {
    fmt::print(stderr,
               "concord: rank {}: CONCORD_SHM_HEAP_BYTES differs between the ranks of this node "
               "({} to {} bytes); every rank's heap is local rank 0's, {} bytes\n",
               state.rank, *least, *most, requested);
  }
}

}  // namespace

std::size_t default_heap_bytes(int local_ranks) {
  constexpr std::size_t kMost = std::size_t{512} << 20;
  constexpr std::size_t kAllHeaps = std::size_t{16} << 30;
  constexpr std::size_t kStep = std::size_t{2} << 20;  // the heaps' alignment
  const std::size_t share = kAllHeaps / static_cast<std::size_t>(std::max(local_ranks, 1));
  return std::min(kMost, std::max(kStep, share / kStep * kStep));
}

SharedArena* node_arena(const CommunicatorState& state) {
  if (state.arena_attempted) return state.arena.get();
  state.arena_attempted = true;
  const Config& cfg = config();
  const Topology& topo = state.topology;

  std::shared_ptr<SharedArena> arena;
  std::string failure;
  if (state.shm && topo.local_size > 1) {
    const std::size_t heap = cfg.shm_heap_bytes.value_or(default_heap_bytes(topo.local_size));
    try {
      warn_if_heap_sizes_differ(state, heap);
      std::unique_ptr<ShmArena> shm = ShmArena::create(topo.local.get(), cfg.shm_region_bytes, heap,
                                                       state.rank, setup_wait(state));
      shm->watch_abort(&state.abort_signal);
      arena = std::move(shm);
    } catch (const Error& e) {
      // A rank that never came, or an abort, is the call's failure, not a
      // reason to fall back to MPI (which would wait for the same rank).
      if (ends_the_setup(e)) throw;
      failure = e.what();
    }
  }
  const bool ok = agree_or_fall_back(
      state.comm.get(), failure, state.rank,
      {"the shared-memory transport", "using the MPI transport instead"}, setup_wait(state));
  if (!ok) arena.reset();
  if (auto* shm = dynamic_cast<ShmArena*>(arena.get())) {
    enable_peer_reads(*shm, state);
    // The measured path choice (collectives/shared/path_choice.hpp) only where
    // every rank asks for it: ranks that measured beside ranks that did not
    // would take different paths for one message.
    state.arena_measures_paths = every_rank_wants(
        state, cfg.shm_measure_paths,
        "CONCORD_SHM_PATH_CHOICE differs between the ranks of this node; large messages take "
        "single copy from the threshold on every rank");
  }
  state.arena = std::move(arena);
  state.arena_everywhere = ok && state.shm;
  return state.arena.get();
}

}  // namespace concord::detail
