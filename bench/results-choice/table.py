"""The measured path choice (measure-R.txt) against single copy throughout
(threshold-R.txt, the runs alternating with them), from run.sh's outputs. Per size:
MPICH / concord and copied rounds / concord in each measure run (same-run ratios),
and concord's % of the same-run roofline in the measure and the threshold runs.

    python3 table.py [RUNS]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results-rounds"))
from table import load, per_run, size_name  # noqa: E402


def main(runs):
    here = os.path.dirname(os.path.abspath(__file__))
    measure = [load(os.path.join(here, f"measure-{r}.txt")) for r in range(1, runs + 1)]
    threshold = [load(os.path.join(here, f"threshold-{r}.txt")) for r in range(1, runs + 1)]
    print("| size | MPICH / concord | copied rounds / concord | concord % of roofline"
          " | single copy throughout: % of roofline | its MPICH / concord |")
    print("|---:|---|---|---|---|---|")
    for n in sorted(measure[0]):
        ours = [r[n]["concord:auto"] for r in measure]
        single = [r[n]["concord:auto"] for r in threshold]
        print(f"| {size_name(n)} "
              f"| {per_run([r[n]['mpi'][0] / c[0] for r, c in zip(measure, ours)], 2)} "
              f"| {per_run([r[n]['concord-copy:auto'][0] / c[0] for r, c in zip(measure, ours)], 2)} "
              f"| {per_run([c[1] for c in ours], 0)} | {per_run([c[1] for c in single], 0)} "
              f"| {per_run([r[n]['mpi'][0] / c[0] for r, c in zip(threshold, single)], 2)} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
