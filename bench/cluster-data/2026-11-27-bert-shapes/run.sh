#!/usr/bin/env bash
# BERT-base's fused step against a per-tensor MPI_Allreduce loop across 2 hosts, at
# 2 x 1 and 2 x 2 ranks, the library's defaults, REPEATS rounds per LINK (default:
# 10 Gbit/s, then unlimited). Each round runs both shapes one after the other, the
# order swapped every round (2x1 first in odd rounds), so a drift of the host's
# state does not favour one shape. Each run is `concord-bench fusion --impl
# fused,flat,mpi-per-tensor`, interleaved step by step, so its ratios compare like
# with like. On the namespace cluster (tests/cluster; torn down on exit).
#   bench/cluster-data/2026-11-27-bert-shapes/run.sh [REPEATS] [OUTDIR] [LINKS...]
#   python3 bench/cluster-data/2026-11-25-in-place/table.py OUTDIR shape
set -euo pipefail
default_items=(10gbit none)
source "$(dirname "$0")/../record_args.sh"
export CONCORD_CLUSTER=${CONCORD_CLUSTER:-bertsh}
trap '"$cluster/cluster-down"' EXIT
"$cluster/cluster-up" 2 none
mkdir -p "$out"
for link in "${items[@]}"; do
  "$cluster/cluster-link" "$link"
  for ((r = 1; r <= repeats; r++)); do
    shapes=(2x1 2x2)
    ((r % 2)) || shapes=(2x2 2x1)
    for shape in "${shapes[@]}"; do
      { uptime; "$cluster/mpirun" -t 900 "$shape" "${BUILD_DIR:-$root/build}/concord-bench" fusion \
          --model "$root/../shared/data/bert_base_gradients.tsv" \
          --impl fused,flat,mpi-per-tensor -i 5 -x 1
        uptime; } >"$out/$link-bert_base-$shape-$r.txt" 2>&1
    done
  done
done
