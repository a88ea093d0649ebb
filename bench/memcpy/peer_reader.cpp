#include "memcpy/peer_reader.hpp"

#include "transport/peer_reads.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace concord::bench {
namespace {

struct Published {
  std::int64_t pid;
  std::uint64_t address;
};

// Where any rank failed: the message of the lowest failing rank, thrown on every
// rank, so that all leave together and whichever rank prints says what happened.
void agree(MPI_Comm comm, int rank, int size, const std::string& error) {
  int first_failed = error.empty() ? size : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_failed, 1, MPI_INT, MPI_MIN, comm);
  if (first_failed == size) return;
  std::array<char, 512> message{};
  if (rank == first_failed) {
    std::snprintf(message.data(), message.size(), "%s", error.c_str());
  }
  MPI_Bcast(message.data(), static_cast<int>(message.size()), MPI_CHAR, first_failed, comm);
  throw std::runtime_error(fmt::format("--cma: rank {}: {}", first_failed, message.data()));
}

// Refused by policy (ptrace rules, seccomp) rather than broken: the caller's test
// skips on the first, and fails on anything else.
bool refused_by_policy(int error) {
  return error == EPERM || error == EACCES || error == ENOSYS;
}

}  // namespace

PeerReader::PeerReader(MPI_Comm comm, const void* mine) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2) {
    throw std::runtime_error("--cma needs at least 2 ranks (each reads the next one's buffer)");
  }
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  if (node_size != size) {
    throw std::runtime_error(
        fmt::format("--cma: the {} ranks must share one node (this one has {})", size, node_size));
  }
  // The library's own calls, so that what is timed is what concord does.
  agree(comm, rank, size, detail::allow_peer_reads());
  MPI_Barrier(comm);  // every rank allows reads before any reads
  const Published own{static_cast<std::int64_t>(::getpid()), reinterpret_cast<std::uint64_t>(mine)};
  std::vector<Published> all(static_cast<std::size_t>(size));
  MPI_Allgather(&own, sizeof own, MPI_BYTE, all.data(), sizeof own, MPI_BYTE, comm);
  const int next = (rank + 1) % size;
  peer_pid_ = static_cast<pid_t>(all[static_cast<std::size_t>(next)].pid);
  peer_address_ = all[static_cast<std::size_t>(next)].address;
  char probe[4];
  const int error = read(probe, sizeof probe);
  std::string why;
  if (error != 0) {
    why = fmt::format("process_vm_readv from rank {} {}: {}", next,
                      refused_by_policy(error) ? "refused" : "failed", std::strerror(error));
    if (refused_by_policy(error)) {
      why +=
          " (the kernel's ptrace policy, /proc/sys/kernel/yama/ptrace_scope, or a container's "
          "seccomp profile forbids cross-memory attach)";
    }
  }
  agree(comm, rank, size, why);
}

int PeerReader::read(void* to, std::size_t bytes) const {
  return detail::read_process_memory(peer_pid_, to, reinterpret_cast<const void*>(peer_address_),
                                     bytes);
}

}  // namespace concord::bench
