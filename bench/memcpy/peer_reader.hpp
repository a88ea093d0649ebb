// Cross-memory attach for `concord-bench memcpy --cma`: each rank reads the next
// rank's buffer with process_vm_readv, the kernel copy that concord's single-copy
// path makes (src/transport/peer_reads.cpp), so that its rate can be measured
// beside memcpy's in the same run. Where it is much slower than memcpy, concord's
// measured path choice takes the copied rounds (docs/ALGORITHMS.md).
#pragma once

#include <mpi.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace concord::bench {

class PeerReader {
 public:
  // Collective over `comm`, whose ranks must share one node (at least 2 of
  // them): allows peers to read this process, publishes `mine` (this rank's
  // buffer, read by the previous rank) and tries one read of the next rank's.
  // Where any rank fails, throws std::runtime_error on every rank with the
  // lowest failing rank's reason ("refused" where the kernel's policy forbids
  // the reads, "failed" otherwise).
  PeerReader(MPI_Comm comm, const void* mine);

  // Copies `bytes` from the start of the next rank's buffer to `to`, as
  // concord's single-copy path does (detail::read_process_memory). Returns the
  // errno of a failed read, 0 on success.
  int read(void* to, std::size_t bytes) const;

 private:
  pid_t peer_pid_ = 0;
  std::uint64_t peer_address_ = 0;
};

}  // namespace concord::bench
