#!/usr/bin/env bash
# How much of two ranks' shortfall from 2x is the host itself? One host,
# alternating, REPEATS times, every process pinned to its own core:
#   B   one rank alone on concord's dataset (cnn_concord_pipeline.py), batch 128
#   B64 the same at batch 64, the per-rank batch of a 2-rank job of global batch 128
#   D   two B64 processes at once (cores 0 and 1), no communication: their summed
#       samples/s is what 2 ranks could reach if the gradient exchange were free
#   C   the unmodified example under concordrun -np 2 -bind-to core (global batch 128)
# Prints each run's samples/s; whole outputs go to OUTDIR/{B,B64,D0,D1,C}-REPEAT.txt.
#   bench/cluster-data/2026-11-24-train/contention.sh [REPEATS] [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
rate() { grep -oE 'samples/s [0-9]+' "$1" | tail -n 1 | cut -d' ' -f2; }
pipeline=("$here/cnn_concord_pipeline.py" --epochs 3)
for ((rep = 1; rep <= ${1:-3}; rep++)); do
  uptime > "$out/uptime-$rep.txt"
  taskset -c 0 python3 "${pipeline[@]}" > "$out/B-$rep.txt" 2>&1
  taskset -c 0 python3 "${pipeline[@]}" --batch-size 64 > "$out/B64-$rep.txt" 2>&1
  taskset -c 0 python3 "${pipeline[@]}" --batch-size 64 > "$out/D0-$rep.txt" 2>&1 &
  taskset -c 1 python3 "${pipeline[@]}" --batch-size 64 > "$out/D1-$rep.txt" 2>&1
  wait
  concordrun -np 2 -bind-to core python3 "$root/examples/fashion_mnist_cnn.py" --epochs 3 \
    > "$out/C-$rep.txt" 2>&1
  d0=$(rate "$out/D0-$rep.txt") d1=$(rate "$out/D1-$rep.txt")
  echo "repeat $rep: B $(rate "$out/B-$rep.txt"); B64 $(rate "$out/B64-$rep.txt");" \
    "D $d0 + $d1 = $((d0 + d1)); C $(rate "$out/C-$rep.txt")"
done
