#!/usr/bin/env bash
# Hierarchical with its step across hosts in one piece (CONCORD_HIERARCHICAL_PIECE_BYTES=0,
# the library before 2026-11-25) and in 1 MiB pieces on the communicator's network
# thread (the default), against the flat algorithms, at 2 hosts x 2 ranks over
# 1 Gbit/s, 4-64 MiB; REPEATS rounds, each running, one after the other:
#   OUTDIR/one-step-R.txt, OUTDIR/pieces-R.txt          placed by the scheduler
#   OUTDIR/one-step-c-R.txt, OUTDIR/pieces-c-R.txt      tests/cluster/mpirun -c
# (the order of the two alternates from round to round). Each run is interleaved
# size by size. On the namespace cluster (tests/cluster; torn down on exit).
#   bench/cluster-data/2026-11-25-pieces/run.sh [REPEATS] [OUTDIR]
#   python3 bench/cluster-data/2026-11-25-pieces/table.py OUTDIR REPEATS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$here}
source "$here/../hier_run.sh"
hier_rounds "${1:-3}" "$out" CONCORD_HIERARCHICAL_PIECE_BYTES one-step:0 pieces:
