#!/usr/bin/env bash
# BERT-base's fused step against a per-tensor MPI_Allreduce loop across 2 hosts x 1
# rank, the library's defaults, REPEATS runs per LINK (default: unlimited, then
# 10 Gbit/s). Each run is `concord-bench fusion --impl fused,flat,mpi-per-tensor`,
# interleaved step by step, so its ratios compare like with like. On the namespace
# cluster (tests/cluster; torn down on exit).
#   bench/cluster-data/2026-11-25-bert/run.sh [REPEATS] [OUTDIR] [LINKS...]
#   python3 bench/cluster-data/2026-11-25-in-place/table.py OUTDIR
set -euo pipefail
default_items=(none 10gbit)
source "$(dirname "$0")/../record_args.sh"
export CONCORD_CLUSTER=${CONCORD_CLUSTER:-bert}
trap '"$cluster/cluster-down"' EXIT
"$cluster/cluster-up" 2 none
mkdir -p "$out"
for link in "${items[@]}"; do
  "$cluster/cluster-link" "$link"
  for ((r = 1; r <= repeats; r++)); do
    { uptime; "$cluster/mpirun" -t 900 2x1 "${BUILD_DIR:-$root/build}/concord-bench" fusion \
        --model "$root/../shared/data/bert_base_gradients.tsv" \
        --impl fused,flat,mpi-per-tensor -i 5 -x 1
      uptime; } >"$out/$link-bert_base-default-$r.txt" 2>&1
  done
done
