#!/usr/bin/env bash
# Hierarchical against the flat algorithms at 2 hosts x 2 ranks over a 1 Gbit/s
# link, 4-64 MiB, REPEATS runs (each interleaved size by size), on the namespace
# cluster (tests/cluster; torn down on exit). Outputs: OUTDIR/2x2-1gbit-R.txt.
#   bench/cluster-data/2026-11-24-evening/hier.sh [REPEATS] [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${2:-$here}
cluster=$root/tests/cluster
export CONCORD_CLUSTER=${CONCORD_CLUSTER:-hier}
trap '"$cluster/cluster-down"' EXIT
"$cluster/cluster-up" 2 1gbit
for ((r = 1; r <= ${1:-3}; r++)); do
  { uptime; "$cluster/mpirun" -t 900 2x2 "${BUILD_DIR:-$root/build}/concord-bench" allreduce \
      --impl concord --algo ring,recursive_doubling,reduce_scatter_allgather,hierarchical \
      -m 4M:64M -i 3 -x 1
    uptime; } > "$out/2x2-1gbit-$r.txt" 2>&1
done
