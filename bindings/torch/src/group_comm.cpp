#include "group_comm.hpp"

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

}  // namespace

concord::Communicator group_communicator(int rank, int size,
                                         const std::vector<int64_t>& world_ranks) {
  concord::Communicator world = concord::Communicator::world();
  const int world_rank = world.rank();
  if (world_ranks.empty() || static_cast<int>(world_ranks.size()) == world.size()) {
    if (rank != world_rank || size != world.size()) {
      mismatch(world_rank, "torch says rank " + std::to_string(rank) + " of " +
                               std::to_string(size) + ", MPI says rank " +
                               std::to_string(world_rank) + " of " + std::to_string(world.size()) +
                               ": RANK and WORLD_SIZE must be MPI's (unset them, and "
                               "`import concord.torch` sets them from MPI)");
    }
    if (world_ranks.empty()) return world;
  }
  if (static_cast<int>(world_ranks.size()) != size || rank < 0 || rank >= size ||
      world_ranks[static_cast<std::size_t>(rank)] != world_rank) {
    mismatch(world_rank, "this process (MPI rank " + std::to_string(world_rank) + ") is not rank " +
                             std::to_string(rank) + " of the group's " +
                             std::to_string(world_ranks.size()) + " ranks");
  }
  std::vector<int> members;
  for (const int64_t r : world_ranks) {
    if (r < 0 || r >= world.size()) {
      mismatch(world_rank, "rank " + std::to_string(r) + " is not a rank of the world's " +
                               std::to_string(world.size()));
    }
    members.push_back(static_cast<int>(r));
  }
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
