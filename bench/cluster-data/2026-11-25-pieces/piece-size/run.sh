#!/usr/bin/env bash
# Hierarchical's piece size at 32-64 MiB: 1, 2 and 4 MiB pieces
# (CONCORD_HIERARCHICAL_PIECE_BYTES) in turn, REPEATS rounds, ring and Hierarchical
# interleaved size by size, 2 hosts x 2 ranks over 1 Gbit/s, into OUTDIR/BYTES-R.txt.
# On the namespace cluster (tests/cluster; torn down on exit).
#   bench/cluster-data/2026-11-25-pieces/piece-size/run.sh [REPEATS] [OUTDIR]
# The records beside this script were made before it was written, by the same loop
# typed at the shell (so their files hold no uptime lines).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cluster=$root/tests/cluster
out=${2:-$here}
export CONCORD_CLUSTER=${CONCORD_CLUSTER:-pc}
trap '"$cluster/cluster-down"' EXIT
"$cluster/cluster-up" 2 1gbit
mkdir -p "$out"
for ((r = 1; r <= ${1:-2}; r++)); do
  for bytes in 1048576 2097152 4194304; do
    { uptime; CONCORD_HIERARCHICAL_PIECE_BYTES=$bytes "$cluster/mpirun" -t 600 2x2 \
        "${BUILD_DIR:-$root/build}/concord-bench" allreduce --impl concord \
        --algo ring,hierarchical -m 32M:64M -i 5 -x 1
      uptime; } >"$out/$bytes-$r.txt" 2>&1
  done
done
