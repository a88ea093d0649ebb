// What a Communicator holds: its duplicate of the user's communicator and the topology.
#pragma once

#include "core/abort_signal.hpp"
#include "core/mpi_comm.hpp"
#include "core/validate.hpp"

#include <concord/error.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace concord::detail {

struct Topology {
  int local_rank = 0;  // rank among the ranks of this (virtual) node
  int local_size = 1;
  int node = 0;  // index of this node, ordered by the lowest rank on each node
  int num_nodes = 1;
  MpiComm local;  // the ranks of this node
  MpiComm cross;  // the ranks with the same local_rank, one per node
  // Over all nodes of the communicator (the same on every rank).
  int min_local_size = 1;
  int max_local_size = 1;
};

class SharedArena;
class TaskThread;        // core/task_thread.hpp
struct DeviceResources;  // device/device_resources.hpp

struct CommunicatorState {
  CommunicatorState() = default;
  // Where the communicator failed or was aborted, its ranks left messages that
  // nobody will receive (a late rank's signature row, a send cut short): its
  // MPI communicators are then released, not freed (MpiComm::release).
  ~CommunicatorState();
  CommunicatorState(const CommunicatorState&) = delete;
  CommunicatorState& operator=(const CommunicatorState&) = delete;

  MpiComm comm;  // concord's private duplicate; all data moves on it
  int rank = 0;
  int size = 1;
  Topology topology;
  // CONCORD_SHM is on for every rank (agreed when the communicator is made: where
  // some ranks set it off, it is off for all, with a warning).
  bool shm = false;
  // Some node holds two ranks of this communicator and `shm`: Auto means
  // Hierarchical. Resolved once, not on every call.
  bool ranks_share_a_node = false;
  // Every rank's MPI takes calls from any thread at any time (MPI_THREAD_MULTIPLE):
  // what Hierarchical's network thread needs. Agreed when the communicator is made.
  bool every_rank_thread_multiple = false;
  // The node's shared-memory arena, made by the first collective that needs it
  // (collectives/shared/node_arena.cpp); null when that failed or is switched off.
  // Collectives on one communicator are serialised, as in MPI.
  mutable std::shared_ptr<SharedArena> arena;
  mutable bool arena_attempted = false;
  mutable bool arena_everywhere = false;  // every rank sharing a node has one
  // CONCORD_SHM_PATH_CHOICE=measure on every rank of this rank's node (agreed
  // with the arena: ranks that measured while others did not would take
  // different paths for one message).
  mutable bool arena_measures_paths = false;
  // What device collectives keep between calls (IPC arena, NCCL communicator,
  // scratch and staging buffers), made by the first one (device/device_resources.cpp).
  mutable std::shared_ptr<DeviceResources> device_resources;
  // The thread that runs Hierarchical's step across nodes while the calling
  // thread works on shared memory, made by the first call that overlaps them
  // (dispatch/dispatch.cpp).
  mutable std::shared_ptr<TaskThread> network_thread;
  // Why this communicator failed, once it has (a checked call's peers did not
  // arrive, a wait for a peer passed its deadline): every later call throws it
  // again (dispatch/call_agreement.hpp).
  mutable std::optional<Error> failure;
  // Communicator::abort() raised it, from any thread; the calls' waits read it.
  // (Unlike `failure`, which only the calling thread writes.) Declared after
  // `device_resources`, so destroyed before them: the word it mirrors into (the
  // device-synchronised path's) is never written once freed.
  mutable AbortSignal abort_signal;
  // Signature rows of checked calls whose sends had not finished when the call
  // ended (a peer that gave up, or came late, never receives them): MPI may still
  // read them, so they live as long as the communicator.
  mutable std::vector<std::unique_ptr<SignatureRow>> orphaned_rows;
};

// Builds the topology of `comm` (collective over it). `virtual_nodes` > 1 splits
// each physical node into that many nodes of consecutive local ranks.
Topology detect_topology(MPI_Comm comm, int virtual_nodes);

}  // namespace concord::detail
