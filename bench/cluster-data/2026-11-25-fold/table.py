"""The fold's table for bench/RESULTS.md from run.sh's records:
    python3 table.py OUTDIR REPEATS [HOSTS...]
Per size: reduce-scatter + allgather's time with the whole-vector fold over its time
with the fold in halves, per round and the median; the same ratio for the ring (the
same code in both builds: the noise between two runs); and each build's
reduce-scatter + allgather over the ring of its own run.
"""
import statistics
import sys


def read(path):
    """{(size, impl): microseconds} from a concord-bench allreduce record."""
    times = {}
    for line in open(path):
        parts = line.split()
        if len(parts) >= 4 and parts[0].isdigit():
            times[(int(parts[0]), parts[3].split(":")[-1])] = float(parts[1])
    return times


def cell(values):
    return " / ".join(f"{v:.2f}" for v in values) + f" → {statistics.median(values):.2f}"


def main(out, repeats, shapes):
    for hosts in shapes:
        runs = {b: [read(f"{out}/{hosts}x1-{b}-{r}.txt") for r in range(1, repeats + 1)]
                for b in ("halves", "whole")}
        sizes = sorted({s for s, _ in runs["halves"][0]})
        print(f"\n{hosts} hosts x 1 rank, 1 Gbit/s\n")
        print("| size | halves ms (median) | whole / halves, per round → median "
              "| ring: whole-run / halves-run | halves / ring | whole / ring |")
        print("|---:|---:|---|---|---|---|")
        for s in sizes:
            h = [run[(s, "reduce_scatter_allgather")] for run in runs["halves"]]
            w = [run[(s, "reduce_scatter_allgather")] for run in runs["whole"]]
            rh = [run[(s, "ring")] for run in runs["halves"]]
            rw = [run[(s, "ring")] for run in runs["whole"]]
            print(f"| {s >> 20} MiB | {statistics.median(h) / 1e3:.1f} | "
                  f"{cell([a / b for a, b in zip(w, h)])} | "
                  f"{cell([a / b for a, b in zip(rw, rh)])} | "
                  f"{cell([a / b for a, b in zip(h, rh)])} | "
                  f"{cell([a / b for a, b in zip(w, rw)])} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), [int(h) for h in sys.argv[3:]] or [3])
