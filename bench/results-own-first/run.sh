#!/usr/bin/env bash
# The own block copied out before the wait for the peers' (the build) against after
# it (the order before), in the same runs: own-late.diff adds `--impl concord-late`
# (concord with the old order, switched per call) to concord-bench. 2 ranks pinned,
# float32 sum, 4 KiB-1 MiB (4-8 KiB take the direct path in both: the control), REPEATS
# runs per MPI, the order of the two concord impls alternating between runs:
#   OUTDIR/{mpich,ompi}-R.txt
# Builds (Release; Open MPI's with -DMPI_C_COMPILER=mpicc.openmpi):
#   git worktree add /tmp/wt-exp HEAD && git -C /tmp/wt-exp apply $PWD/bench/results-own-first/own-late.diff
#   cmake -S /tmp/wt-exp -B /tmp/wt-exp/build -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/wt-exp/build --target concord-bench
#   cmake -S /tmp/wt-exp -B /tmp/wt-exp/build-ompi -DCMAKE_BUILD_TYPE=Release -DMPI_C_COMPILER=mpicc.openmpi
#   cmake --build /tmp/wt-exp/build-ompi --target concord-bench
#   bench/results-own-first/run.sh 10 /tmp/wt-exp/build /tmp/wt-exp/build-ompi [OUTDIR]
#   python3 bench/results-own-first/same_run.py OUTDIR mpich 10   (and ompi)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repeats=${1:?REPEATS}
mpich=${2:?the MPICH build}
ompi=${3:?the Open MPI build}
out=${4:-$here/same-run}
mkdir -p "$out"
run() {  # name launcher...
  local name=$1
  shift
  for ((r = 1; r <= repeats; r++)); do
    local impl=concord,concord-late,mpi
    ((r % 2 == 0)) && impl=concord-late,concord,mpi
    { uptime; "$@" -n 2 "$build/concord-bench" allreduce --impl "$impl" -m 4K:1M -i 2000 -x 200
      uptime; } >"$out/$name-$r.txt" 2>&1
  done
}
build=$mpich run mpich mpiexec.mpich -bind-to core
build=$ompi run ompi mpiexec.openmpi --allow-run-as-root --bind-to core
