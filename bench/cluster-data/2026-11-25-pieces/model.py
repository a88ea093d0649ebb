"""Hierarchical's time in one step and in 1 MiB pieces at 2 hosts x 2 ranks over
1 Gbit/s: measured (run.sh's outputs in DIR, medians over REPEATS rounds, per
placement) against bench/cluster_model.py's prediction from the quiet fit, with the
node's shared-memory rate as fitted on one host and as timed at 2 x 2 (SHM_RATE GB/s).

    python3 model.py DIR REPEATS [SHM_RATE]
"""
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
bench = os.path.join(here, "..", "..")
sys.path.insert(0, bench)
import cluster_model as cm  # noqa: E402

sys.path.insert(0, os.path.join(here, ".."))
from records import load_script  # noqa: E402

late = load_script("2026-11-24-late")  # load()

# The node's two phases at 2 x 2, 8 MiB, timed on each rank with a temporary patch
# (bench/RESULTS.md, "Hierarchical: the node's phases behind the network"): 4.1-5.0 ms
# reduce-scatter and 5.3-6.7 ms allgather, about 10.5 ms for 2 x 8 MiB through memory.
SHM_RATE_AT_2X2 = 2 * (8 << 20) / 10.5e-3 / 1e9


def main(d, repeats, shm_rate):
    # gamma as predict and tune take it (one core's add where the fit cannot separate it)
    fitted = cm.with_gamma(json.load(open(os.path.join(here, "..", "2026-11-24-quiet",
                                                       "model.json"))))
    timed = dict(fitted, shm=dict(fitted["shm"], beta=1 / (shm_rate * 1e9)))
    link = fitted["net"]["1gbit"]
    print(f"| size | placement | measured ms: one step → pieces (ratio) | model, fitted node "
          f"| model, node at {shm_rate:.1f} GB/s |")
    print("|---:|---|---|---|---|")
    for placement, name in (("", "scheduler"), ("-c", "a core per host")):
        one = [late.load(f"{d}/one-step{placement}-{r}.txt") for r in range(1, repeats + 1)]
        pieces = [late.load(f"{d}/pieces{placement}-{r}.txt") for r in range(1, repeats + 1)]
        for n in sorted(one[0]):
            a = statistics.median(run[n]["hierarchical"] for run in one) / 1e3
            b = statistics.median(run[n]["hierarchical"] for run in pieces) / 1e3
            cells = []
            for model in (fitted, timed):
                p0 = cm.hierarchical_time(2, 2, n, model, link, piece_bytes=0) * 1e3
                p1 = cm.hierarchical_time(2, 2, n, model, link, piece_bytes=1 << 20) * 1e3
                cells.append(f"{p0:.1f} → {p1:.1f} ({p1 / p0:.3f})")
            print(f"| {n >> 20} MiB | {name} | {a:.1f} → {b:.1f} ({b / a:.3f}) | "
                  + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]),
         float(sys.argv[3]) if len(sys.argv) > 3 else SHM_RATE_AT_2X2)
