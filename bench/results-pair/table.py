"""The direct path's limit at 2 ranks: runs of run.sh as a markdown table. For each size
from 1 KiB to 128 KiB, MPICH / concord per run and median with the built-in limits
(pair-R.txt) and with CONCORD_SHM_DIRECT_BYTES=1024 (old-R.txt), MPICH timed in the same
run as concord (the runs alternate, so concord's own times are from different moments of
a host whose speed drifts: only the same-run ratios compare), and concord's median times.

    python3 table.py DIR REPEATS
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results-rounds"))
from table import load, per_run  # noqa: E402


def main(d, repeats):
    new = [load(f"{d}/pair-{r}.txt") for r in range(1, repeats + 1)]
    old = [load(f"{d}/old-{r}.txt") for r in range(1, repeats + 1)]
    print("| size | MPICH / concord, built-in limits | MPICH / concord, 1 KiB limit |"
          " concord µs, built-in / 1 KiB limit (medians) |")
    print("|---:|---|---|---|")
    for n in sorted(old[0]):
        ours = [r[n]["concord:auto"][0] for r in new]
        theirs = [r[n]["concord:auto"][0] for r in old]
        print(f"| {n >> 10} KiB | {per_run([r[n]['mpi'][0] / o for r, o in zip(new, ours)], 2)} | "
              f"{per_run([r[n]['mpi'][0] / t for r, t in zip(old, theirs)], 2)} | "
              f"{statistics.median(ours):.2f} / {statistics.median(theirs):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
