#!/usr/bin/env bash
# A grouped allreduce before and after it starts its engine cycle at once: the
# installed package's libconcord.so.0 is swapped between two builds, alternating
# (BEFORE first in odd rounds), REPEATS rounds; each round times
#   grouped_latency.py (mpiexec -n 2, pinned) and
#   the unmodified Keras CNN under concordrun -np 2 -bind-to core (samples/s, ms a step).
# The installed library is put back on every exit path.
#   bench/results-group-cycle/run.sh BEFORE.so AFTER.so [REPEATS] [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
before=${1:?usage: run.sh BEFORE.so AFTER.so [REPEATS] [OUTDIR]}
after=${2:?usage: run.sh BEFORE.so AFTER.so [REPEATS] [OUTDIR]}
repeats=${3:-3}
out=${4:-$here}
[[ $repeats =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: REPEATS must be >= 1, got '$repeats'" >&2; exit 2; }
for f in "$before" "$after"; do [ -f "$f" ] || { echo "run.sh: no library '$f'" >&2; exit 2; }; done
installed=$(python3 -c "import concord, os; print(os.path.dirname(concord.__file__))")/libconcord.so.0
saved=$(mktemp)
cp "$installed" "$saved"
trap 'cp "$saved" "$installed"; rm -f "$saved"' EXIT
export TF_CPP_MIN_LOG_LEVEL=2
mkdir -p "$out"
for ((r = 1; r <= repeats; r++)); do
  order=(before after)
  ((r % 2)) || order=(after before)
  for v in "${order[@]}"; do
    lib=$before
    [ "$v" = after ] && lib=$after
    cp "$lib" "$installed"
    { uptime
      mpiexec.mpich -n 2 -bind-to core python3 "$here/grouped_latency.py"
      concordrun -np 2 -bind-to core python3 "$root/examples/fashion_mnist_cnn.py" --epochs 3 |
        tr '\r' '\n' | grep -E 'ms/step|samples/s'
      uptime; } >"$out/$v-$r.txt" 2>&1
    echo "$v $r: $(grep -hE 'grouped_allreduce|samples/s' "$out/$v-$r.txt" | tr '\n' ' ')"
  done
done
