#include "peer_reader.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

namespace concord::bench {
namespace {

struct Published {
  std::int64_t pid;
  std::uint64_t address;
};

// The same answer on every rank, so that all throw or none.
void check_on_all(MPI_Comm comm, bool ok, const std::string& why) {
  int all_ok = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, comm);
  if (!all_ok) throw std::runtime_error(ok ? "--cma: " + why + " (on another rank)" : why);
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
  // Yama's ptrace_scope 1 lets only a process's ancestors read it, unless it says
  // otherwise (EINVAL: no Yama, nothing to allow).
  const bool allowed = ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0 || errno == EINVAL;
  check_on_all(comm, allowed,
               fmt::format("--cma: prctl(PR_SET_PTRACER): {}", std::strerror(errno)));
  const Published own{static_cast<std::int64_t>(::getpid()), reinterpret_cast<std::uint64_t>(mine)};
  std::vector<Published> all(static_cast<std::size_t>(size));
  MPI_Allgather(&own, sizeof own, MPI_BYTE, all.data(), sizeof own, MPI_BYTE, comm);
  const Published& next = all[static_cast<std::size_t>((rank + 1) % size)];
  peer_pid_ = static_cast<pid_t>(next.pid);
  peer_address_ = next.address;
  char probe[4];
  const int error = read(probe, sizeof probe);
  check_on_all(comm, error == 0,
               fmt::format("--cma: process_vm_readv from rank {} refused: {} (the kernel's "
                           "ptrace policy, /proc/sys/kernel/yama/ptrace_scope, or a "
                           "container's seccomp profile forbids cross-memory attach)",
                           (rank + 1) % size, std::strerror(error)));
}

int PeerReader::read(void* to, std::size_t bytes) const {
  // A read may stop short (at a page the kernel could not pin): go on from there.
  for (std::size_t done = 0; done < bytes;) {
    iovec local{static_cast<char*>(to) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(peer_address_ + done), bytes - done};
    const ssize_t got = ::process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
    if (got < 0) return errno;
    if (got == 0) return EFAULT;
    done += static_cast<std::size_t>(got);
  }
  return 0;
}

}  // namespace concord::bench
