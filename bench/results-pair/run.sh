#!/usr/bin/env bash
# The direct path's limit at 2 ranks (tuning table: shm_pair_direct_bytes, 8 KiB) against
# the limit every rank count had before (1 KiB), with MPICH and the roofline in the same runs:
# REPEATS rounds, each one run of each, alternating; 2 ranks pinned, float32 sum.
#   pair-R.txt: the built-in limits, 4 B to 64 MiB (the issue-11 table of this build)
#   old-R.txt:  CONCORD_SHM_DIRECT_BYTES=1024 (one limit for every rank count), 1 KiB to 128 KiB
#   ompi-R.txt: the built-in limits against Open MPI, concord built against it (issue 8's
#               build-ompi-bench: cmake -G Ninja -B build-ompi-bench -DCMAKE_BUILD_TYPE=Release
#               -DMPI_C_COMPILER=mpicc.openmpi && ninja -C build-ompi-bench concord-bench)
#   bench/results-pair/run.sh [REPEATS] [BUILD] [OPENMPI_BUILD]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$here/../../build}
ompi_build=${3:-$here/../../build-ompi-bench}
bench=(mpiexec.mpich -n 2 -bind-to core "$build/concord-bench" allreduce --impl concord,mpi,roofline)
for ((r = 1; r <= ${1:-3}; r++)); do
  { uptime; "${bench[@]}" -m 4:67108864; uptime; } > "$here/pair-$r.txt" 2>&1
  { uptime; CONCORD_SHM_DIRECT_BYTES=1024 "${bench[@]}" -m 1024:131072; uptime; } \
    > "$here/old-$r.txt" 2>&1
  { uptime; mpiexec.openmpi --allow-run-as-root --bind-to core -n 2 "$ompi_build/concord-bench" \
      allreduce --impl concord,mpi,roofline -m 4:67108864; uptime; } > "$here/ompi-$r.txt" 2>&1
done
