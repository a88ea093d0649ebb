// The deadline's wording and a peer's name (mpi_wait.hpp).
#include "core/mpi_wait.hpp"

#include <fmt/format.h>

#include <mutex>
#include <vector>

namespace concord::detail {

Error timeout_error(int rank, double timeout_s, const std::string& waiting_on,
                    const std::string& consequence) {
  return Error(ErrorCode::Timeout, rank,
               fmt::format("no message completed for {} s while waiting on {}: the peer may have "
                           "died or its network link gone down; {} "
                           "(CONCORD_TRANSPORT_TIMEOUT_S sets the limit, 0 waits forever)",
                           timeout_s, waiting_on, consequence));
}

Error aborted_error(int rank, const std::string& when) {
  return Error(ErrorCode::Shutdown, rank,
               fmt::format("this rank aborted the communicator (Communicator::abort) {}: the "
                           "call failed, and so does every later one",
                           when));
}

void cancel_receive(MPI_Request& recv) {
  if (recv == MPI_REQUEST_NULL) return;
  MPI_Cancel(&recv);
  // MPI_Test sets the request to MPI_REQUEST_NULL once it is cancelled or complete.
  poll_until_done([&](int* done) { return MPI_Test(&recv, done, MPI_STATUS_IGNORE); },
                  kCancelledReceiveWaitS);
  if (recv != MPI_REQUEST_NULL) MPI_Request_free(&recv);  // the bound ran out, or the test failed
}

void keep_buffer_until_exit(std::shared_ptr<void> buffer) {
  // Leaked on purpose: a function-local static would be destroyed at exit
  // before concord's MPI_Finalize.
  static auto* kept_mutex = new std::mutex;
  static auto* kept = new std::vector<std::shared_ptr<void>>;
  std::lock_guard lock(*kept_mutex);
  kept->push_back(std::move(buffer));
}

// Algorithms run on sub-communicators (a node's leaders, say), so a peer's rank
// there is not what the user's logs show: name its MPI_COMM_WORLD rank as well.
std::string describe_peer(MPI_Comm comm, int peer) {
  int world_peer = MPI_UNDEFINED;
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world_group = MPI_GROUP_NULL;
  if (MPI_Comm_group(comm, &group) == MPI_SUCCESS &&
      MPI_Comm_group(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS) {
    MPI_Group_translate_ranks(group, 1, &peer, world_group, &world_peer);
  }
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world_group != MPI_GROUP_NULL) MPI_Group_free(&world_group);
  if (world_peer == MPI_UNDEFINED || world_peer == peer) return fmt::format("rank {}", peer);
  return fmt::format("rank {} (world rank {})", peer, world_peer);
}

}  // namespace concord::detail
