#!/usr/bin/env bash
# Hierarchical's pieces with one in flight against two (the adopted order: piece k
# is queued before waiting for piece k-1), at 2 hosts x 2 ranks over 1 Gbit/s,
# 4-64 MiB, every flat algorithm interleaved size by size; REPEATS rounds, each
# running one-deep and two-deep one after the other (the order alternating), placed
# by the scheduler and with a core per host (tests/cluster/mpirun -c):
#   OUTDIR/{one,two}-deep[-c]-R.txt
# One in flight is a temporary switch (one-deep.diff: CONCORD_TMP_ONE_DEEP waits for
# piece k-1 before queueing piece k), so BUILD_DIR must hold concord-bench built with
# that patch applied:
#   git worktree add /tmp/exp HEAD && (cd /tmp/exp && git apply $PWD/one-deep.diff)
#   cmake -S /tmp/exp -B /tmp/exp/build -DCMAKE_BUILD_TYPE=Release -DCONCORD_WITH_CUDA=OFF
#   cmake --build /tmp/exp/build --target concord-bench concord_ucx_close_deadline
#   BUILD_DIR=/tmp/exp/build bench/cluster-data/2026-11-25-depth/run.sh 3 [OUTDIR]
#   python3 bench/cluster-data/2026-11-25-depth/table.py OUTDIR 3
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${2:-$here}
source "$here/../hier_run.sh"
hier_rounds "${1:-3}" "$out" CONCORD_TMP_ONE_DEEP one-deep:1 two-deep:
