#include "collectives/node_arena.hpp"

#include "core/agreement.hpp"
#include "core/config.hpp"
#include "transport/shm_arena.hpp"

#include <concord/error.hpp>

#include <string>

namespace concord::detail {

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
  state.arena = std::move(arena);
  state.arena_everywhere = ok && cfg.shm;
  return state.arena.get();
}

}  // namespace concord::detail
