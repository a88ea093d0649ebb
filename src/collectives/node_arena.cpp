#include "collectives/node_arena.hpp"

#include "core/agreement.hpp"
#include "core/config.hpp"
#include "transport/shm_arena.hpp"

#include <concord/error.hpp>

#include <string>

namespace concord::detail {

namespace {

// Single-copy reads between the node's ranks, where every one of them wants
// them (CONCORD_SHM_CMA) and the kernel allows them to every one; else none.
void enable_peer_reads(ShmArena& arena, const CommunicatorState& state) {
  MPI_Comm local = state.topology.local.get();
  if (!all_ranks_ok(local, config().shm_cma, state.rank)) return;
  const std::string failure = arena.probe_peer_reads(local);
  arena.set_peer_reads(
      agree_or_fall_back(local, failure, state.rank,
                         {"single-copy reads between ranks (cross-memory attach)",
                          "copying large messages through shared memory instead"}));
}

}  // namespace

SharedArena* node_arena(const CommunicatorState& state) {
  if (state.arena_attempted) return state.arena.get();
  state.arena_attempted = true;
  const Config& cfg = config();
  const Topology& topo = state.topology;

  std::shared_ptr<SharedArena> arena;
  std::string failure;
  if (cfg.shm && topo.local_size > 1) {
    try {
      arena = ShmArena::create(topo.local.get(), cfg.shm_region_bytes, state.rank);
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  const bool ok =
      agree_or_fall_back(state.comm.get(), failure, state.rank,
                         {"the shared-memory transport", "using the MPI transport instead"});
  if (!ok) arena.reset();
  if (auto* shm = dynamic_cast<ShmArena*>(arena.get())) enable_peer_reads(*shm, state);
  state.arena = std::move(arena);
  state.arena_everywhere = ok && cfg.shm;
  return state.arena.get();
}

}  // namespace concord::detail
