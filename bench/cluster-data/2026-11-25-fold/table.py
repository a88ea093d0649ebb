"""The fold's table for bench/RESULTS.md from run.sh's records:
    python3 table.py OUTDIR REPEATS [HOSTS...]
Per size: reduce-scatter + allgather's time with the whole-vector fold over its time
with the fold in halves, per round and the median; the same ratio for the ring (the
same code in both builds: the noise between two runs); and each build's
reduce-scatter + allgather over the ring of its own run.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from records import load_script  # noqa: E402

late = load_script("2026-11-24-late")  # load(): {size: {algorithm: latency us}}


def main(out, repeats, shapes):
    for hosts in shapes:
        runs = {b: [late.load(f"{out}/{hosts}x1-{b}-{r}.txt") for r in range(1, repeats + 1)]
                for b in ("halves", "whole")}
        sizes = sorted(runs["halves"][0])
        print(f"\n{hosts} hosts x 1 rank, 1 Gbit/s\n")
        print("| size | halves ms (median) | whole / halves, per round → median "
              "| ring: whole-run / halves-run | halves / ring | whole / ring |")
        print("|---:|---:|---|---|---|---|")
        for s in sizes:
            h = [run[s]["reduce_scatter_allgather"] for run in runs["halves"]]
            w = [run[s]["reduce_scatter_allgather"] for run in runs["whole"]]
            rh = [run[s]["ring"] for run in runs["halves"]]
            rw = [run[s]["ring"] for run in runs["whole"]]
            print(f"| {s >> 20} MiB | {statistics.median(h) / 1e3:.1f} | "
                  f"{late.per_run([a / b for a, b in zip(w, h)], 2)} | "
                  f"{late.per_run([a / b for a, b in zip(rw, rh)], 2)} | "
                  f"{late.per_run([a / b for a, b in zip(h, rh)], 2)} | "
                  f"{late.per_run([a / b for a, b in zip(w, rw)], 2)} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), [int(h) for h in sys.argv[3:]] or [3])
