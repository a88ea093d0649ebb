#!/usr/bin/env bash
# concord (measured path choice, the default) against Open MPI's MPI_Allreduce and the
# roofline, concord built against Open MPI (build-ompi-bench, issue 8): REPEATS runs,
# 2 ranks pinned, float32 sum, 4 B to 64 MiB, interleaved size by size.
#   bench/results-choice/run-ompi.sh [REPEATS] [BUILD]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$here/../../build-ompi-bench}
for ((r = 1; r <= ${1:-3}; r++)); do
  { uptime; mpiexec.openmpi --allow-run-as-root --bind-to core -n 2 "$build/concord-bench" \
      allreduce --impl concord,concord-copy,mpi,roofline -m 4:67108864
    uptime; } > "$here/ompi-$r.txt" 2>&1
done
