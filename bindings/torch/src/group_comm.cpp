#include "group_comm.hpp"

#include "group_meeting.hpp"

#include <concord/error.hpp>

#include <mpi.h>

#include <string>

namespace concord_torch {

namespace {

[[noreturn]] void mismatch(int world_rank, const std::string& what) {
  throw concord::Error(concord::ErrorCode::InvalidArgument, world_rank,
                       "torch.distributed process group: " + what);
}

void check(int rc, int world_rank, const char* call) {
  if (rc != MPI_SUCCESS) {
    throw concord::Error(concord::ErrorCode::MpiError, world_rank,
                         std::string(call) + " failed making a process group's communicator");
  }
}

// Owns an MPI group or communicator until the Communicator has its duplicate.
struct GroupHandle {
  MPI_Group group = MPI_GROUP_NULL;
  ~GroupHandle() {
    if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  }
};
struct CommHandle {
  MPI_Comm comm = MPI_COMM_NULL;
  ~CommHandle() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

// The group's members as world ranks, in group order: every world rank where
// torch passes none (the default group). Throws where torch's idea of the group
// disagrees with MPI's.
std::vector<int> members_of(const concord::Communicator& world, int rank, int size,
                            const std::vector<int64_t>& world_ranks) {
  const int world_rank = world.rank();
  if (world_ranks.empty() || static_cast<int>(world_ranks.size()) == world.size()) {
    if (rank != world_rank || size != world.size()) {
      mismatch(world_rank, "torch says rank " + std::to_string(rank) + " of " +
                               std::to_string(size) + ", MPI says rank " +
                               std::to_string(world_rank) + " of " + std::to_string(world.size()) +
                               ": RANK and WORLD_SIZE must be MPI's (unset them, and "
                               "`import concord.torch` sets them from MPI)");
    }
  }
  std::vector<int> members;
  if (world_ranks.empty()) {
    for (int r = 0; r < world.size(); ++r) members.push_back(r);
    return members;
  }
  if (static_cast<int>(world_ranks.size()) != size || rank < 0 || rank >= size ||
      world_ranks[static_cast<std::size_t>(rank)] != world_rank) {
    mismatch(world_rank, "this process (MPI rank " + std::to_string(world_rank) + ") is not rank " +
                             std::to_string(rank) + " of the group's " +
                             std::to_string(world_ranks.size()) + " ranks");
  }
  for (const int64_t r : world_ranks) {
    if (r < 0 || r >= world.size()) {
      mismatch(world_rank, "rank " + std::to_string(r) + " is not a rank of the world's " +
                               std::to_string(world.size()));
    }
    members.push_back(static_cast<int>(r));
  }
  return members;
}

}  // namespace

concord::Communicator group_communicator(int rank, int size,
                                         const std::vector<int64_t>& world_ranks,
                                         const std::string& group_name, double timeout_s) {
  concord::Communicator world = concord::Communicator::world();
  const int world_rank = world.rank();
  std::vector<int> members = members_of(world, rank, size, world_ranks);
  // Every member comes before any goes on: MPI_Comm_create_group below, and the
  // engine's set-up after, would otherwise wait for a member that never comes
  // with no deadline or only with CONCORD_TRANSPORT_TIMEOUT_S, not the group's.
  meet_group_members(world.mpi_comm(), members, world_rank, group_name, timeout_s);
  if (world_ranks.empty()) return world;
  GroupHandle world_group, group;
  check(MPI_Comm_group(world.mpi_comm(), &world_group.group), world_rank, "MPI_Comm_group");
  check(MPI_Group_incl(world_group.group, size, members.data(), &group.group), world_rank,
        "MPI_Group_incl");
  CommHandle comm;
  // Collective over the group's members only, as torch's new_group is for them.
  check(MPI_Comm_create_group(world.mpi_comm(), group.group, 0, &comm.comm), world_rank,
        "MPI_Comm_create_group");
  return concord::Communicator(comm.comm);  // duplicates it
}

}  // namespace concord_torch
