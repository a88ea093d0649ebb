#!/usr/bin/env bash
# BERT-base's fused step against a per-tensor MPI_Allreduce loop across 2 hosts (x 1
# rank unless SHAPES says otherwise, below), the library's defaults, REPEATS runs per
# LINK (default: unlimited, then 10 Gbit/s). Each run is `concord-bench fusion --impl
# fused,flat,mpi-per-tensor`, interleaved step by step, so its ratios compare like with
# like. On the namespace cluster (tests/cluster; torn down on exit).
#   bench/cluster-data/2026-11-25-bert/run.sh [REPEATS] [OUTDIR] [LINKS...]
#   python3 bench/cluster-data/2026-11-25-in-place/table.py OUTDIR
# SHAPES="2x1 2x2" (2026-11-27-bert-shapes) runs each of these shapes in every round
# instead, the order reversed in even rounds, into LINK-bert_base-SHAPE-R.txt (table:
# add the argument `shape`); without it, 2x1 into LINK-bert_base-default-R.txt.
# (2026-11-27-bert-shapes was recorded by a copy of this script that did just that, as
# of commit 2b1e41b.)
set -euo pipefail
default_items=(none 10gbit)
source "$(dirname "$0")/../record_args.sh"
export CONCORD_CLUSTER=${CONCORD_CLUSTER:-bert}
read -r -a shapes <<<"${SHAPES:-2x1}"
trap '"$cluster/cluster-down"' EXIT
"$cluster/cluster-up" 2 none
mkdir -p "$out"
for link in "${items[@]}"; do
  "$cluster/cluster-link" "$link"
  for ((r = 1; r <= repeats; r++)); do
    order=("${shapes[@]}")
    ((r % 2)) || for ((i = 0; i < ${#shapes[@]}; i++)); do order[i]=${shapes[-1 - i]}; done
    for shape in "${order[@]}"; do
      name=${SHAPES:+$shape}
      { uptime; "$cluster/mpirun" -t 900 "$shape" "${BUILD_DIR:-$root/build}/concord-bench" fusion \
          --model "$root/../shared/data/bert_base_gradients.tsv" \
          --impl fused,flat,mpi-per-tensor -i 5 -x 1
        uptime; } >"$out/$link-bert_base-${name:-default}-$r.txt" 2>&1
    done
  done
done
