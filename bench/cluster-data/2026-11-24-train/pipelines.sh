#!/usr/bin/env bash
# One host, alternating, REPEATS times: (A) the unmodified example on one pinned
# rank (Keras's own pipeline for numpy arrays), (B) the same model on one pinned
# rank fed by concord.data's dataset (cnn_concord_pipeline.py), (C) the
# unmodified example under concordrun -np 2 -bind-to core (concord's dataset).
# Prints each run's samples/s; each run's whole output (Keras's per-epoch lines
# included) goes to OUTDIR/{A,B,C}-REPEAT.txt.
#   bench/cluster-data/2026-11-24-train/pipelines.sh [REPEATS] [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
rate() { tee "$1" | grep -oE 'samples/s [0-9]+' | tail -n 1 | cut -d' ' -f2; }
for ((rep = 1; rep <= ${1:-3}; rep++)); do
  a=$(taskset -c 0 python3 "$root/examples/fashion_mnist_cnn.py" --epochs 3 2>&1 | rate "$out/A-$rep.txt")
  b=$(taskset -c 0 python3 "$here/cnn_concord_pipeline.py" --epochs 3 2>&1 | rate "$out/B-$rep.txt")
  c=$(concordrun -np 2 -bind-to core python3 "$root/examples/fashion_mnist_cnn.py" --epochs 3 2>&1 |
    rate "$out/C-$rep.txt")
  echo "repeat $rep: A one rank, Keras pipeline $a; B one rank, concord pipeline $b; C 2 ranks $c"
done
