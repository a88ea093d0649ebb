#!/usr/bin/env bash
# The engine's fused step across 2 hosts x 1 rank with large tensors packed
# (CONCORD_FUSION_IN_PLACE_BYTES=0, the engine before 2026-11-25) and alone where
# they lie (the default, 256 KiB), for ResNet-50 and BERT-base on each LINK;
# REPEATS rounds, the two configurations alternating (AB, then BA, ...). Each run
# is `concord-bench fusion --impl fused,flat,mpi-per-tensor`, interleaved.
# On the namespace cluster (tests/cluster; torn down on exit).
#   bench/cluster-data/2026-11-25-in-place/run.sh [REPEATS] [OUTDIR] [LINKS...]
#   python3 bench/cluster-data/2026-11-25-in-place/table.py OUTDIR
set -euo pipefail
default_items=(none 10gbit 1gbit)
source "$(dirname "$0")/../record_args.sh"
links=("${items[@]}")
export CONCORD_CLUSTER=${CONCORD_CLUSTER:-inplc}
trap '"$cluster/cluster-down"' EXIT
"$cluster/cluster-up" 2 none
mkdir -p "$out"
one_run() {  # FILE IN_PLACE_BYTES MODEL
  local file=$1 bytes=$2 model=$3
  { uptime; CONCORD_FUSION_IN_PLACE_BYTES=$bytes "$cluster/mpirun" -t 900 2x1 \
      "${BUILD_DIR:-$root/build}/concord-bench" fusion \
      --model "$root/../shared/data/${model}_gradients.tsv" \
      --impl fused,flat,mpi-per-tensor -i 5 -x 1
    uptime; } >"$file" 2>&1
}
for link in "${links[@]}"; do
  "$cluster/cluster-link" "$link"
  for ((r = 1; r <= repeats; r++)); do
    configs=(packed:0 alone:262144)
    ((r % 2 == 0)) && configs=(alone:262144 packed:0)
    for model in resnet50 bert_base; do
      for c in "${configs[@]}"; do
        one_run "$out/$link-$model-${c%%:*}-$r.txt" "${c#*:}" "$model"
      done
    done
  done
done
