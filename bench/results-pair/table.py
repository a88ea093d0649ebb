"""The direct path's limit at 2 ranks: runs of run.sh as a markdown table. For each size
from 1 KiB to 128 KiB, MPICH / concord per run and median with the built-in limits
(pair-R.txt) and with CONCORD_SHM_DIRECT_BYTES=1024 (old-R.txt), MPICH timed in the same
run as concord (the runs alternate, so concord's own times are from different moments of
a host whose speed drifts: only the same-run ratios compare), and concord's median times.

    python3 table.py DIR REPEATS
"""
import statistics
import sys


def load(path):
    """{size: {impl: latency us}} from one concord-bench output."""
    rows = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 4 and p[0].isdigit():
            rows.setdefault(int(p[0]), {})[p[3]] = float(p[1])
    return rows


def runs_of(d, name, repeats):
    return [load(f"{d}/{name}-{r}.txt") for r in range(1, repeats + 1)]


def fmt(values):
    return f"{' / '.join(f'{v:.2f}' for v in values)} → {statistics.median(values):.2f}"


def main(d, repeats):
    new, old = runs_of(d, "pair", repeats), runs_of(d, "old", repeats)
    print("| size | MPICH / concord, built-in limits | MPICH / concord, 1 KiB limit |"
          " concord µs, built-in / 1 KiB limit (medians) |")
    print("|---:|---|---|---|")
    for n in sorted(old[0]):
        ours = [r[n]["concord:auto"] for r in new]
        theirs = [r[n]["concord:auto"] for r in old]
        print(f"| {n >> 10} KiB | {fmt([r[n]['mpi'] / o for r, o in zip(new, ours)])} | "
              f"{fmt([r[n]['mpi'] / t for r, t in zip(old, theirs)])} | "
              f"{statistics.median(ours):.2f} / {statistics.median(theirs):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
