// The interposer's run-time switches, read once from the environment.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

namespace concord::mpi_interposer {

// Below this many bytes the MPI the interposer was built against is as fast as
// concord or faster on the dev VM (RESULTS.md at commit 5aa2ccf, "The interposer after its
// per-call cut"): Open MPI 4.1's allreduce takes 0.9-1.05 µs up to 256 B at 2
// ranks, the interposed call 1.06-1.15 µs, and from 512 B the interposer is
// 1.4-2.9x faster; MPICH 4.0 is slower than concord from 4 B up. (Open MPI's
// mpi.h defines OPEN_MPI.)
#if defined(OPEN_MPI) && OPEN_MPI
inline constexpr std::size_t kDefaultMinBytes = 512;
#else
inline constexpr std::size_t kDefaultMinBytes = 0;
#endif

struct Settings {
  // CONCORD_MPI_INTERPOSE (default 1): 0 passes every call to PMPI_* unchanged.
  bool enabled = true;
  // CONCORD_MPI_INTERPOSE_VERBOSE (default 0): rank 0 prints the rules at the
  // first MPI_Allreduce and what was taken and passed on at MPI_Finalize.
  bool verbose = false;
  // CONCORD_MPI_INTERPOSE_MIN_BYTES (default kDefaultMinBytes): messages below
  // this many bytes go to MPI.
  std::size_t min_bytes = kDefaultMinBytes;
  // Set when a variable could not be parsed: the interposer then stays off and
  // says why (rank 0), rather than guess.
  std::string error;
};

// Reads the environment; settings() calls it once. Never throws (it is read from
// the interposer's noexcept entry points): where its messages cannot be
// allocated, the interposer is off and says so.
Settings parse_settings() noexcept;

// Parsed on first use; thread-safe. Inline: read on every MPI_Allreduce.
inline const Settings& settings() noexcept {
  static const Settings parsed = parse_settings();
  return parsed;
}

}  // namespace concord::mpi_interposer
