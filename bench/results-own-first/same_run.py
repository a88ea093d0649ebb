"""The own block out first against after the wait, in the same runs (own-late.diff:
`--impl concord-late` runs concord with the own block copied out after the wait,
the order before this change), for bench/RESULTS.md:
    python3 bench/results-own-first/same_run.py bench/results-own-first/same-run mpich 10
Per size: concord-late's time over concord's per run and the median; MPI over concord
and over concord-late (median, and the lowest run).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "results-rounds"))
from table import per_run  # noqa: E402


def read(path):
    times = {}
    for line in open(path):
        parts = line.split()
        if len(parts) >= 4 and parts[0].isdigit():
            times[(int(parts[0]), parts[3])] = float(parts[1])
    return times


def main(folder, mpi, repeats):
    runs = [read(f"{folder}/{mpi}-{r}.txt") for r in range(1, repeats + 1)]
    print("| size | after the wait / first, per run → median | MPI / concord, own block first "
          "(median, lowest) | MPI / concord, after the wait (median, lowest) |")
    print("|---:|---|---|---|")
    for s in sorted({size for size, _ in runs[0]}):
        late = [r[(s, "concord-late")] / r[(s, "concord:auto")] for r in runs]
        first = [r[(s, "mpi")] / r[(s, "concord:auto")] for r in runs]
        after = [r[(s, "mpi")] / r[(s, "concord-late")] for r in runs]
        label = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
        print(f"| {label} | {per_run(late, 2)} | {statistics.median(first):.2f} "
              f"({min(first):.2f}) | {statistics.median(after):.2f} ({min(after):.2f}) |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
