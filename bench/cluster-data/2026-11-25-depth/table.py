"""Hierarchical with one piece in flight against two (run.sh's outputs in DIR): per
size and placement, Hierarchical's time two-deep / one-deep in each round (the two
ran one after the other) and the median, the median times, and the best flat
algorithm / Hierarchical for each (the issue's target: 1.35 from 4 MiB, every run).

    python3 table.py DIR REPEATS
"""
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
from records import load_script  # noqa: E402

late = load_script("2026-11-24-late")  # load(), ratios(), and results-rounds' per_run


def main(d, repeats):
    print("| size | placement | two / one in flight, per round → median | ms, one → two "
          "(medians) | best flat / Hierarchical, one | ... two |")
    print("|---:|---|---|---|---|---|")
    for placement, name in (("", "scheduler"), ("-c", "a core per host")):
        one = [late.load(f"{d}/one-deep{placement}-{r}.txt") for r in range(1, repeats + 1)]
        two = [late.load(f"{d}/two-deep{placement}-{r}.txt") for r in range(1, repeats + 1)]
        for n in sorted(one[0]):
            ratio = [b[n]["hierarchical"] / a[n]["hierarchical"] for a, b in zip(one, two)]
            ms = [statistics.median(run[n]["hierarchical"] for run in runs) / 1e3
                  for runs in (one, two)]
            flat = [late.per_run([late.ratios(run)[n][0] for run in runs], 2)
                    for runs in (one, two)]
            print(f"| {n >> 20} MiB | {name} | {late.per_run(ratio, 3)} | "
                  f"{ms[0]:.1f} → {ms[1]:.1f} | {flat[0]} | {flat[1]} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
