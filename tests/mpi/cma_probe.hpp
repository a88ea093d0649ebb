// Whether this host lets the ranks of a communicator read each other's memory
// with process_vm_readv (cross-memory attach), found out without concord, so a
// test can tell "concord did not take its single-copy path" (a bug) from "the
// host forbids the system call" (a container's seccomp profile, Yama's
// ptrace_scope 3): concord then falls back by design and says so.
#pragma once

#include <mpi.h>

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY (static_cast<unsigned long>(-1))
#endif

namespace concord::test {

// Collective over `comm`: each rank lets any process of its user read it (as
// concord does at set-up under Yama's ptrace_scope 1), then reads a value from
// the next rank. True on every rank when every read returned that value.
inline bool host_allows_cross_memory_attach(MPI_Comm comm) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // EINVAL without Yama: fine
  const std::uint64_t mine = 0x5eed0000u + static_cast<std::uint64_t>(rank);
  struct Where {
    std::int64_t pid;
    std::uint64_t address;
  };
  const Where here{static_cast<std::int64_t>(::getpid()), reinterpret_cast<std::uintptr_t>(&mine)};
  std::vector<Where> all(static_cast<std::size_t>(size));
  MPI_Allgather(&here, sizeof here, MPI_BYTE, all.data(), sizeof here, MPI_BYTE, comm);
  const int next = (rank + 1) % size;
  const Where& peer = all[static_cast<std::size_t>(next)];
  std::uint64_t seen = 0;
  iovec local{&seen, sizeof seen};
  iovec remote{reinterpret_cast<void*>(static_cast<std::uintptr_t>(peer.address)), sizeof seen};
  const ssize_t got = ::process_vm_readv(static_cast<pid_t>(peer.pid), &local, 1, &remote, 1, 0);
  int ok = got == static_cast<ssize_t>(sizeof seen) &&
           seen == 0x5eed0000u + static_cast<std::uint64_t>(next);
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
  // `mine` must outlive the peer's read of it.
  MPI_Barrier(comm);
  return ok == 1;
}

}  // namespace concord::test
