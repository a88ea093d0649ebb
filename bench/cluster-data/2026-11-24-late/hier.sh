#!/usr/bin/env bash
# Hierarchical against the flat algorithms at 2 hosts x 2 ranks over a 1 Gbit/s
# link, 4-64 MiB, REPEATS rounds; each round runs three configurations one after
# the other, always in this order (each run interleaved size by size):
#   OUTDIR/spread-R.txt:  the scheduler places all four ranks on both cores
#   OUTDIR/hostcore-R.txt: tests/cluster/mpirun -c, each host's ranks confined to
#                          a core of their own (host i on core i): hosts do not
#                          compete for cores
#   OUTDIR/tuned-R.txt:    the same with the model's tuning file for this cluster
#                          (../2026-11-24-quiet/tuning-2x2-1gbit.json: one leader per
#                          host across the link, as bench/cluster_model.py tune writes
#                          for 1 Gbit/s)
# On the namespace cluster (tests/cluster; torn down on exit).
#   bench/cluster-data/2026-11-24-late/hier.sh [REPEATS] [OUTDIR]
#   python3 bench/cluster-data/2026-11-24-late/table.py OUTDIR REPEATS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$here}
source "$here/../hier_run.sh"
for ((r = 1; r <= ${1:-3}; r++)); do
  hier_run "$out/spread-$r.txt" 5
  hier_run "$out/hostcore-$r.txt" 5 -c
  CONCORD_TUNING_FILE=$here/../2026-11-24-quiet/tuning-2x2-1gbit.json \
    hier_run "$out/tuned-$r.txt" 5 -c
done
