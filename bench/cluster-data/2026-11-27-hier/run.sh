#!/usr/bin/env bash
# Hierarchical against the flat algorithms with the library's defaults (1 MiB pieces on
# the network thread), at 2 hosts x 2 ranks over 1 Gbit/s, 4-64 MiB: REPEATS rounds,
# each running, one after the other (the order alternating from round to round):
#   OUTDIR/default-R.txt      placed by the scheduler
#   OUTDIR/default-c-R.txt    tests/cluster/mpirun -c (a core per host)
# Each run is interleaved size by size. On the namespace cluster (torn down on exit).
#   bench/cluster-data/2026-11-27-hier/run.sh [REPEATS] [OUTDIR]
#   python3 bench/cluster-data/2026-11-27-hier/table.py OUTDIR REPEATS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repeats=${1:-5}
out=${2:-$here}
[[ $repeats =~ ^[0-9]+$ ]] || { echo "run.sh: REPEATS must be a count, got '$repeats'" >&2; exit 2; }
source "$here/../hier_run.sh"
mkdir -p "$out"
unset CONCORD_HIERARCHICAL_PIECE_BYTES
for ((r = 1; r <= repeats; r++)); do
  placements=("" -c)
  ((r % 2)) || placements=(-c "")
  for p in "${placements[@]}"; do hier_run "$out/default${p}-$r.txt" 5 $p; done
done
