// The memory-bandwidth roofline that allreduce results are judged against: for each
// size, the bandwidth one core gets from memcpy and from one float32 reduce pass
// (dst = a + b), the two things an allreduce step does to its bytes; with --cma also
// from process_vm_readv of another rank's buffer, which concord's single-copy path
// does instead of a copy through shared memory.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace concord::bench {

struct MemcpyOptions {
  std::size_t min_bytes = 4096;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::optional<int> iterations;  // timed samples per size and kernel (default 15)
  // Every rank measures at once (synchronised sample by sample), as ranks sharing a
  // node's memory do in an allreduce; otherwise rank 0 measures alone.
  bool all_ranks = false;
  // Also time process_vm_readv of the next rank's buffer (every rank at once, as
  // with all_ranks; the ranks must share one node).
  bool cma = false;
  std::string json_path;
};

struct Bandwidth {
  std::string impl;  // "memcpy", "reduce" or "cma"
  std::size_t bytes = 0;
  double gbps = 0;     // bytes / median time of one call, 1e9 bytes per GB; mean over ranks
  int iterations = 0;  // timed samples the median is taken over
  int ranks = 1;       // ranks measuring at the same time
};

// Collective over `comm`. Prints the table on rank 0 as sizes complete and writes
// the JSON there; returns the results (complete on rank 0).
std::vector<Bandwidth> run_memcpy_bench(const MemcpyOptions& o, MPI_Comm comm);

}  // namespace concord::bench
