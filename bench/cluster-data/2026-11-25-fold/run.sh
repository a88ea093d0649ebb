#!/usr/bin/env bash
# Reduce-scatter + allgather with the fold in halves against the whole-vector fold
# it replaced, on hosts of one rank each over 1 Gbit/s links (tests/cluster; torn
# down when the script exits). Per shape, REPEATS rounds; each round runs both
# builds one after the other, the order alternating, and each run times the ring
# and reduce-scatter + allgather interleaved size by size, 1-32 MiB:
#   OUTDIR/<hosts>x1-{halves,whole}-R.txt
# OLD_BUILD holds concord-bench built from the tree before the change (b17a97e):
#   git worktree add /tmp/wt-old b17a97e
#   cmake -S /tmp/wt-old -B /tmp/wt-old/build -DCMAKE_BUILD_TYPE=Release
#   cmake --build /tmp/wt-old/build --target concord-bench
#   OLD_BUILD=/tmp/wt-old/build bench/cluster-data/2026-11-25-fold/run.sh 3 [OUTDIR] [HOSTS...]
#   python3 bench/cluster-data/2026-11-25-fold/table.py OUTDIR 3 [HOSTS...]
set -euo pipefail
default_items=(3)
source "$(dirname "$0")/../record_args.sh"
shapes=("${items[@]}")
old=${OLD_BUILD:?OLD_BUILD must name the build of the tree before the change}
new=${BUILD_DIR:-$root/build}
export CONCORD_CLUSTER=${CONCORD_CLUSTER:-fold}
trap '"$cluster/cluster-down"' EXIT
mkdir -p "$out"
for hosts in "${shapes[@]}"; do
  "$cluster/cluster-up" "$hosts" 1gbit
  for ((r = 1; r <= repeats; r++)); do
    builds=(halves:$new whole:$old)
    ((r % 2 == 0)) && builds=(whole:$old halves:$new)
    for b in "${builds[@]}"; do
      { uptime; "$cluster/mpirun" -t 900 "${hosts}x1" "${b#*:}/concord-bench" allreduce \
          --impl concord --algo ring,reduce_scatter_allgather -m 1M:32M -i 5 -x 1
        uptime; } >"$out/${hosts}x1-${b%%:*}-$r.txt" 2>&1
    done
  done
done
