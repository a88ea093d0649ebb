// The interposer's run-time switches, read once from the environment.
#pragma once

#include <cstddef>
#include <string>

namespace concord::mpi_interposer {

struct Settings {
  // CONCORD_MPI_INTERPOSE (default 1): 0 passes every call to PMPI_* unchanged.
  bool enabled = true;
  // CONCORD_MPI_INTERPOSE_VERBOSE (default 0): rank 0 prints the rules at the
  // first MPI_Allreduce and what was taken and passed on at MPI_Finalize.
  bool verbose = false;
  // CONCORD_MPI_INTERPOSE_MIN_BYTES (default 0): messages below this many bytes
  // go to MPI. 0 because concord is faster than MPICH's MPI_Allreduce from 4 B
  // up on the dev VM (bench/RESULTS.md); raise it where your MPI wins small sizes.
  std::size_t min_bytes = 0;
  // Set when a variable could not be parsed: the interposer then stays off and
  // says why (rank 0), rather than guess.
  std::string error;
};

// Reads the environment; settings() calls it once.
Settings parse_settings();

// Parsed on first use; thread-safe. Inline: read on every MPI_Allreduce.
inline const Settings& settings() {
  static const Settings parsed = parse_settings();
  return parsed;
}

}  // namespace concord::mpi_interposer
