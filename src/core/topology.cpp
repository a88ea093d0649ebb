// Which ranks share a node: MPI_COMM_TYPE_SHARED, optionally split into virtual nodes.
#include "core/communicator_state.hpp"
#include "core/mpi_check.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

namespace concord::detail {

Topology detect_topology(MPI_Comm comm, int virtual_nodes) {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  Topology topo;

  MPI_Comm shared = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared),
            "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", rank);
  MpiComm physical(shared);
  int physical_rank = 0;
  int physical_size = 1;
  check_mpi(MPI_Comm_rank(physical.get(), &physical_rank), "MPI_Comm_rank", rank);
  check_mpi(MPI_Comm_size(physical.get(), &physical_size), "MPI_Comm_size", rank);

  if (virtual_nodes > 1) {
    // Agreed on every rank: a rank on a smaller node must not throw while the
    // others go on into the split below and wait there for it.
    int smallest = physical_size;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &smallest, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce",
              rank);
    if (virtual_nodes > smallest) {
      throw Error(
          ErrorCode::InvalidArgument, rank,
          fmt::format("CONCORD_VIRTUAL_NODES={} but only {} ranks share {} node; "
                      "each virtual node needs at least one rank",
                      virtual_nodes, smallest, smallest == physical_size ? "this" : "another"));
    }
    // Consecutive local ranks per virtual node; uneven splits differ by one rank
    // (5 ranks as 2 nodes: 3 + 2).
    int color = physical_rank * virtual_nodes / physical_size;
    MPI_Comm split = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(physical.get(), color, physical_rank, &split), "MPI_Comm_split", rank);
    topo.local = MpiComm(split);
  } else {
    topo.local = std::move(physical);
  }
  check_mpi(MPI_Comm_rank(topo.local.get(), &topo.local_rank), "MPI_Comm_rank", rank);
  check_mpi(MPI_Comm_size(topo.local.get(), &topo.local_size), "MPI_Comm_size", rank);

  MPI_Comm cross = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm, topo.local_rank, rank, &cross), "MPI_Comm_split", rank);
  topo.cross = MpiComm(cross);

  // The leaders' cross communicator holds one rank per node, ordered by world
  // rank: its rank is the node index. Leaders tell their node.
  int node_info[2] = {0, 1};
  if (topo.local_rank == 0) {
    check_mpi(MPI_Comm_rank(topo.cross.get(), &node_info[0]), "MPI_Comm_rank", rank);
    check_mpi(MPI_Comm_size(topo.cross.get(), &node_info[1]), "MPI_Comm_size", rank);
  }
  check_mpi(MPI_Bcast(node_info, 2, MPI_INT, 0, topo.local.get()), "MPI_Bcast", rank);
  topo.node = node_info[0];
  topo.num_nodes = node_info[1];

  int sizes[2] = {-topo.local_size, topo.local_size};  // min as -max of negatives
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, comm), "MPI_Allreduce", rank);
  topo.min_local_size = -sizes[0];
  topo.max_local_size = sizes[1];
  return topo;
}

}  // namespace concord::detail
