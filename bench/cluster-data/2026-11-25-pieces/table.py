"""Best flat algorithm's time over Hierarchical's, per size, per run and median,
and Hierarchical's median time, for Hierarchical in one piece and in pieces (run.sh's
outputs in DIR); the issue's target is 1.35 at every size from 4 MiB, in every run.

    python3 table.py DIR REPEATS
"""
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
from records import load_script  # noqa: E402

late = load_script("2026-11-24-late")  # load(), ratios(), and results-rounds' per_run


CONFIGS = {"one-step": "scheduler, one piece", "pieces": "scheduler, 1 MiB pieces",
           "one-step-c": "a core per host, one piece",
           "pieces-c": "a core per host, 1 MiB pieces"}
TARGET = 1.35


def main(d, repeats, configs=CONFIGS):
    """The table for DIR/CONFIG-R.txt, R = 1..REPEATS, then per configuration how many
    per-size runs reach the target."""
    loaded = {c: [late.load(f"{d}/{c}-{r}.txt") for r in range(1, repeats + 1)]
              for c in configs}
    print("| size | configuration | best flat / Hierarchical, per run → median |"
          " Hierarchical ms, median |")
    print("|---:|---|---|---:|")
    reached = {c: [0, 0] for c in configs}
    for n in sorted(next(iter(loaded.values()))[0]):
        for c, name in configs.items():
            values = [late.ratios(run)[n][0] for run in loaded[c]]
            reached[c][0] += sum(v >= TARGET for v in values)
            reached[c][1] += len(values)
            ms = statistics.median(run[n]["hierarchical"] for run in loaded[c]) / 1000
            print(f"| {n >> 20} MiB | {name} | {late.per_run(values, 2)} | {ms:.1f} |")
    print()
    for c, name in configs.items():
        print(f"{name}: {reached[c][0]} of {reached[c][1]} per-size runs at {TARGET} or more")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
