"""Median % of roofline and MPICH/concord per single-copy round size (files <prefix><round>-<run>.txt)."""
import statistics
import sys

from table import load
prefix, rounds = sys.argv[1], sys.argv[2].split(",")
runs = {r: [load(f"{prefix}{r}-{i}.txt") for i in (1, 2, 3)] for r in rounds}
sizes = sorted(runs[rounds[0]][0])
name = lambda n: f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
print("| round | " + " | ".join(name(n) for n in sizes) + " |")
print("|---|" + "---:|" * len(sizes))
for r in rounds:
    cells = []
    for n in sizes:
        roof = statistics.median(x[n]["concord:auto"][1] for x in runs[r])
        mpi = statistics.median(x[n]["mpi"][0] / x[n]["concord:auto"][0] for x in runs[r])
        cells.append(f"{roof:.0f} % / {mpi:.2f}")
    print(f"| {r} | " + " | ".join(cells) + " |")
