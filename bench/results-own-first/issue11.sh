#!/usr/bin/env bash
# Issue 11's tables with this build: concord, MPI and the roofline interleaved size by
# size, 4 B-64 MiB, 2 ranks pinned, float32 sum; REPEATS rounds, each one run against
# MPICH (MPICH_BUILD) and one against Open MPI (OMPI_BUILD: concord built against it,
# -DMPI_C_COMPILER=mpicc.openmpi):
#   bench/results-own-first/issue11.sh REPEATS MPICH_BUILD OMPI_BUILD [OUTDIR]
# IMPLS (default concord,mpi,roofline) and SIZES (default 4:67108864) change what runs.
#   python3 bench/results-rounds/table.py MPICH OUTDIR/mpich-{1,2,3}.txt
#   python3 bench/results-rounds/table.py "Open MPI" OUTDIR/ompi-{1,2,3}.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repeats=${1:?REPEATS}
mpich=${2:?MPICH_BUILD}
ompi=${3:?OMPI_BUILD}
out=${4:-$here/issue11}
mkdir -p "$out"
args=(allreduce --impl "${IMPLS:-concord,mpi,roofline}" -m "${SIZES:-4:67108864}")
for ((r = 1; r <= repeats; r++)); do
  { uptime; mpiexec.mpich -n 2 -bind-to core "$mpich/concord-bench" "${args[@]}"; uptime; } \
    >"$out/mpich-$r.txt" 2>&1
  { uptime; mpiexec.openmpi --allow-run-as-root --bind-to core -n 2 "$ompi/concord-bench" \
      "${args[@]}"; uptime; } >"$out/ompi-$r.txt" 2>&1
done
