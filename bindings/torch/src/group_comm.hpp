// The MPI communicator of a torch process group.
#pragma once

#include <concord/communicator.hpp>

#include <cstdint>
#include <vector>

namespace concord_torch {

// The communicator of a group whose members are `world_ranks` (ranks of
// MPI_COMM_WORLD, in group order; empty: the whole world), in which this
// process has rank `rank` of `size`. Collective over the group's members only.
// Throws concord::Error where torch's idea of the group disagrees with MPI's
// (a RANK or WORLD_SIZE that is not MPI's, a group this process is not in).
concord::Communicator group_communicator(int rank, int size,
                                         const std::vector<int64_t>& world_ranks);

}  // namespace concord_torch
