#!/usr/bin/env bash
# Hierarchical against the flat algorithms at 2 hosts x 2 ranks over a 1 Gbit/s
# link, 4-64 MiB, REPEATS runs (each interleaved size by size), on the namespace
# cluster (tests/cluster; torn down on exit). Outputs: OUTDIR/2x2-1gbit-R.txt.
#   bench/cluster-data/2026-11-24-evening/hier.sh [REPEATS] [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$here}
source "$here/../hier_run.sh"
for ((r = 1; r <= ${1:-3}; r++)); do
  hier_run "$out/2x2-1gbit-$r.txt" 3
done
