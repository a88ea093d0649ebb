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
  // Collective over `comm`. Its first exchange and the duplicate wait at most
  // CONCORD_TRANSPORT_TIMEOUT_S for the other ranks: past it, Error(Timeout)
  // naming the construction, and those exchanges stay unmatched on `comm`.
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

  // For a rank that gives up on its peers (c10d's abort, an error elsewhere),
  // from any thread: a call running on this communicator stops waiting for
  // them and fails with ErrorCode::Shutdown, and so does every later call.
  // Peers already in that call fail too, where they wait on this rank through
  // shared memory, and otherwise at their own deadline (a checked call's
  // agreement_timeout_s, CONCORD_TRANSPORT_TIMEOUT_S). Messages still in flight
  // are left to MPI, as after a timeout. For good, and on this rank only.
  // Copies share the flag.
  void abort() const noexcept;
  bool aborted() const noexcept;

  const detail::CommunicatorState& state() const { return *state_; }

 private:
  explicit Communicator(std::shared_ptr<detail::CommunicatorState> state);
  std::shared_ptr<detail::CommunicatorState> state_;
};

}  // namespace concord
