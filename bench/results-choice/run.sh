#!/usr/bin/env bash
# The measured path choice against single copy throughout, MPICH and the roofline:
# REPEATS runs of each, alternating; 2 ranks pinned, float32 sum, 4 B to 64 MiB.
#   measure-R.txt:   CONCORD_SHM_PATH_CHOICE=measure (the default)
#   threshold-R.txt: CONCORD_SHM_PATH_CHOICE=threshold (single copy from 256 KiB, as before)
# Each run also times concord-copy (copied rounds only) and MPI_Allreduce, interleaved.
#   bench/results-choice/run.sh [REPEATS] [BUILD]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$here/../../build}
for ((r = 1; r <= ${1:-3}; r++)); do
  for choice in measure threshold; do
    { uptime; CONCORD_SHM_PATH_CHOICE=$choice mpiexec.mpich -n 2 -bind-to core \
        "$build/concord-bench" allreduce --impl concord,concord-copy,mpi,roofline -m 4:67108864
      uptime; } > "$here/$choice-$r.txt" 2>&1
  done
done
