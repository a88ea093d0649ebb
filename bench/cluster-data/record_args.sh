# Sourced by the record scripts under bench/cluster-data/ whose command line is
#   run.sh [REPEATS] [OUTDIR] [ITEMS...]
# (ITEMS: the shapes or links to run). Before sourcing, the script sets
# default_items, its list when ITEMS are not given. Sets here (the script's
# folder), root (the repository), cluster (tests/cluster), repeats (default 3),
# out (default: here) and the array items; a REPEATS that is not a count of
# rounds stops the script with a message.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cluster=$root/tests/cluster
repeats=${1:-3}
out=${2:-$here}
[[ $repeats =~ ^[0-9]+$ ]] ||
  { echo "$(basename "$here")/run.sh: REPEATS must be a count of rounds, got '$repeats'" >&2; exit 2; }
items=("${@:3}")
((${#items[@]})) || items=("${default_items[@]}")
