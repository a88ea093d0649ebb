#!/usr/bin/env bash
# Transparent huge pages for the benchmark's buffers: the machine's THP mode switched
# between "madvise" (this VM's setting: malloc'd buffers get 4 KiB pages) and "always"
# (2 MiB pages), alternating, REPEATS rounds. Each round runs, in each mode,
# `concord-bench memcpy --cma` (memcpy against process_vm_readv of the next rank's
# buffer) and `concord-bench allreduce --impl concord,concord-shared,mpi,roofline`,
# 2 ranks pinned, MPICH. Needs root; the mode found at the start is put back on exit.
#   bench/results-thp/run.sh [REPEATS] [OUTDIR]
#   python3 bench/results-thp/table.py OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
repeats=${1:-3}
out=${2:-$here}
knob=/sys/kernel/mm/transparent_hugepage/enabled
[[ -w $knob ]] || { echo "results-thp/run.sh: needs root and $knob" >&2; exit 2; }
was=$(sed -E 's/.*\[([a-z]+)\].*/\1/' "$knob")
trap 'echo "$was" > "$knob"' EXIT
bench=${BUILD_DIR:-$root/build}/concord-bench
mkdir -p "$out"
for ((r = 1; r <= repeats; r++)); do
  modes=(madvise always)
  ((r % 2 == 0)) && modes=(always madvise)
  for mode in "${modes[@]}"; do
    echo "$mode" > "$knob"
    { uptime; mpiexec.mpich -n 2 -bind-to core "$bench" memcpy --cma -m 256K:64M -i 9; uptime; } \
      >"$out/memcpy-$mode-$r.txt" 2>&1
    { uptime; mpiexec.mpich -n 2 -bind-to core "$bench" allreduce \
        --impl concord,concord-shared,mpi,roofline -m 256K:64M; uptime; } \
      >"$out/allreduce-$mode-$r.txt" 2>&1
  done
done
