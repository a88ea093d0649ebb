# Sourced by pipelines.sh and contention.sh: where things are, and OUTDIR ($2,
# else a new temporary directory) made. Expects `here` set to this directory.
root=$(cd "$here/../../.." && pwd)
export TF_CPP_MIN_LOG_LEVEL=2
out=${2:-$(mktemp -d)}
mkdir -p "$out"
