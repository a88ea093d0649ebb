# Sourced by the Hierarchical record scripts (2026-11-24-evening/hier.sh,
# 2026-11-24-late/hier.sh, 2026-11-25-pieces/run.sh, 2026-11-25-depth/run.sh): brings
# up a 2-host cluster at 1 Gbit/s (tests/cluster, torn down when the script exits)
# and defines hier_rounds (at the end: two configurations in alternating rounds) and
#   hier_run FILE ITERATIONS [tests/cluster/mpirun options...]
# which runs concord-bench allreduce at 2 hosts x 2 ranks, every flat algorithm and
# Hierarchical interleaved size by size, 4-64 MiB, into FILE between two uptimes,
# after the CONCORD_ variables in force. It sets the sourcing script's EXIT trap
# and the globals root and cluster.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$root/tests/cluster
export CONCORD_CLUSTER=${CONCORD_CLUSTER:-hier}
trap '"$cluster/cluster-down"' EXIT
"$cluster/cluster-up" 2 1gbit
hier_run() {
  local file=$1 iterations=$2
  shift 2
  { uptime; env | sort | grep '^CONCORD_' || true; "$cluster/mpirun" -t 900 "$@" 2x2 "${BUILD_DIR:-$root/build}/concord-bench" allreduce \
      --impl concord --algo ring,recursive_doubling,reduce_scatter_allgather,hierarchical \
      -m 4M:64M -i "$iterations" -x 1
    uptime; } > "$file" 2>&1
}
# hier_rounds REPEATS OUT VAR NAME:VALUE NAME:VALUE
# REPEATS rounds of the two configurations, the order alternating (AB, then BA, ...),
# each run placed by the scheduler and with a core per host (mpirun -c), 5 iterations,
# into OUT/NAME[-c]-R.txt; a configuration's VALUE is exported as VAR for its runs
# (an empty VALUE unsets VAR: concord's default).
hier_rounds() {
  local repeats=$1 out=$2 var=$3 first=$4 second=$5 r placement c
  mkdir -p "$out"
  for ((r = 1; r <= repeats; r++)); do
    local configs=("$first" "$second")
    ((r % 2 == 0)) && configs=("$second" "$first")
    for placement in "" -c; do
      for c in "${configs[@]}"; do
        if [ -n "${c#*:}" ]; then export "$var=${c#*:}"; else unset "$var"; fi
        hier_run "$out/${c%%:*}${placement:+-c}-$r.txt" 5 $placement
      done
    done
  done
}
