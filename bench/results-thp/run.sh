#!/usr/bin/env bash
# Transparent huge pages and cross-memory reads: the machine's THP mode switched between
# "madvise" (this VM's setting: buffers that do not ask for huge pages get 4 KiB pages) and
# "always" (2 MiB pages where the kernel has them), alternating, REPEATS rounds. Each
# round runs, in each mode, `concord-bench memcpy --cma` (memcpy against process_vm_readv
# of the next rank's buffer) and `concord-bench allreduce --impl
# concord,concord-shared,mpi,roofline`, 2 ranks pinned, MPICH. memcpy's buffers follow the
# mode; the allreduce's already ask for huge pages, so there the mode changes only MPI's own
# memory. Needs root; the mode found at the start is put back on exit.
#   bench/results-thp/run.sh [REPEATS] [OUTDIR]
#   python3 bench/results-thp/table.py OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
repeats=${1:-3}
out=${2:-$here}
[[ $repeats =~ ^[1-9][0-9]*$ ]] ||
  { echo "results-thp/run.sh: REPEATS must be a count of rounds (1 or more), got '$repeats'" >&2
    exit 2; }
knob=/sys/kernel/mm/transparent_hugepage/enabled
[[ -w $knob ]] || { echo "results-thp/run.sh: needs root and a writable $knob" >&2; exit 2; }
was=$(sed -nE 's/.*\[([a-z+]+)\].*/\1/p' "$knob")
[[ -n $was ]] || { echo "results-thp/run.sh: cannot read the current mode from $knob" >&2; exit 2; }
flag=""  # while it exists, stamp()'s sampler polls; removed on every exit path too
trap 'rm -f "$flag"; echo "$was" > "$knob"' EXIT
bench=${BUILD_DIR:-$root/build}/concord-bench
mkdir -p "$out"
# The mode in force and the most anonymous memory in huge pages seen during the run (the
# machine's total, sampled every 0.1 s; buffers get them only where the kernel has a free
# 2 MiB page at the fault).
stamp() { # FILE COMMAND...
  local file=$1 status=0
  shift
  { uptime; echo "# THP: $(cat "$knob"), defrag: $(cat "${knob%/*}/defrag")"; } >"$file"
  flag=$(mktemp)
  (peak=0
    while [[ -e $flag ]] && kill -0 $$ 2>/dev/null; do
      kb=$(awk '/^AnonHugePages:/ {print $2}' /proc/meminfo)
      ((kb > peak)) && peak=$kb
      sleep 0.1
    done
    echo "# AnonHugePages, peak during the run: $peak kB") >"$file.peak" &
  "$@" >>"$file" 2>&1 || status=$?
  rm -f "$flag"
  wait || true
  cat "$file.peak" >>"$file" 2>/dev/null || true
  rm -f "$file.peak"
  uptime >>"$file"
  if ((status != 0)); then
    echo "results-thp/run.sh: $* failed (status $status); its output is in $file" >&2
    return "$status"
  fi
}
for ((r = 1; r <= repeats; r++)); do
  modes=(madvise always)
  ((r % 2 == 0)) && modes=(always madvise)
  for mode in "${modes[@]}"; do
    echo "$mode" > "$knob"
    stamp "$out/memcpy-$mode-$r.txt" \
      mpiexec.mpich -n 2 -bind-to core "$bench" memcpy --cma -m 256K:64M -i 9
    stamp "$out/allreduce-$mode-$r.txt" mpiexec.mpich -n 2 -bind-to core "$bench" allreduce \
      --impl concord,concord-shared,mpi,roofline -m 256K:64M
  done
done
