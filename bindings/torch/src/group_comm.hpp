// The MPI communicator of a torch process group.
#pragma once

#include <concord/communicator.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace concord_torch {

// The communicator of a group whose members are `world_ranks` (ranks of
// MPI_COMM_WORLD, in group order; empty: the whole world), in which this
// process has rank `rank` of `size`. Collective over the group's members only,
// who first meet (group_meeting.hpp) under torch's `group_name` for the group
// and its timeout, `timeout_s` (0: none). Throws concord::Error where torch's
// idea of the group disagrees with MPI's (a RANK or WORLD_SIZE that is not
// MPI's, a group this process is not in), and Error(Timeout) naming the members
// that did not come within the timeout.
concord::Communicator group_communicator(int rank, int size,
                                         const std::vector<int64_t>& world_ranks,
                                         const std::string& group_name, double timeout_s);

// The direct path's communicator (backend.hpp): a duplicate of `group` where
// CONCORD_TORCH_DIRECT is unset or 1 (read when the group is made; anything but 0 or 1 is
// an error) and its ranks, more than one, share one node; none otherwise (across nodes a late
// rank would wait out CONCORD_TRANSPORT_TIMEOUT_S in MPI, not the group's
// timeout). Collective over the group: a first allreduce on it sets up its
// shared memory now, so that a rank coming late to a call that timed out meets
// its peers' poisoned counters there, not a set-up that nobody else joins.
std::optional<concord::Communicator> direct_communicator(const concord::Communicator& group);

}  // namespace concord_torch
