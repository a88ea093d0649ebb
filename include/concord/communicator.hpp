// A group of ranks and its topology: the handle every collective takes.
#pragma once

#include <mpi.h>

#include <memory>

namespace concord {

namespace detail {
struct CommunicatorState;
}

// Owns a duplicate of an MPI communicator, so concord's messages never match
// the application's. Copies share the same duplicate; it is freed when the last
// copy goes (or left alone if MPI was already finalized by then).
class Communicator {
 public:
  // MPI_COMM_WORLD. Initialises MPI (MPI_THREAD_MULTIPLE) if nobody has; in that
  // case concord also finalizes it at process exit.
  static Communicator world();
  explicit Communicator(MPI_Comm comm);

  int rank() const;
  int size() const;
  // Topology: ranks sharing a node (MPI_COMM_TYPE_SHARED, or a virtual node when
  // CONCORD_VIRTUAL_NODES splits one machine), this rank's place among them,
  // this node's index and the number of nodes.
  int local_rank() const;
  int local_size() const;
  int node() const;
  int num_nodes() const;

  // The duplicated communicator concord sends on. Do not free it.
  MPI_Comm mpi_comm() const;

  const detail::CommunicatorState& state() const { return *state_; }

 private:
  explicit Communicator(std::shared_ptr<detail::CommunicatorState> state);
  std::shared_ptr<detail::CommunicatorState> state_;
};

}  // namespace concord
