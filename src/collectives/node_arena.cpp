#include "collectives/node_arena.hpp"

#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "transport/shm_arena.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <cstdio>
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
  int ok = failure.empty() ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, state.comm.get()),
            "MPI_Allreduce", state.rank);
  if (ok == 0) {
    if (!failure.empty()) {
      fmt::print(stderr, "{}; using the MPI transport instead\n", failure);
    } else if (state.rank == 0) {
      fmt::print(stderr,
                 "concord: rank 0: the shared-memory transport failed on another node; "
                 "using the MPI transport instead\n");
    }
    arena.reset();
  }
  state.arena = std::move(arena);
  state.arena_everywhere = ok != 0 && cfg.shm;
  return state.arena.get();
}

}  // namespace concord::detail
