"""Best flat algorithm's time over Hierarchical's, per size: per run and median, for
each configuration of hier.sh found in DIR (spread-R.txt, hostcore-R.txt, tuned-R.txt);
the issue's target is 1.35 at every size from 4 MiB, in every run.

    python3 table.py DIR REPEATS
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "results-rounds"))
from table import per_run  # noqa: E402


def load(path):
    """{size: {algorithm: latency us}} from one concord-bench output."""
    rows = {}
    for line in open(path):
        p = line.split()
        if len(p) >= 4 and p[0].isdigit() and p[3].startswith("concord:"):
            rows.setdefault(int(p[0]), {})[p[3].split(":", 1)[1]] = float(p[1])
    return rows


def ratios(run):
    """{size: (best flat / hierarchical, best flat's name)}."""
    out = {}
    for n, algos in run.items():
        flat = {a: t for a, t in algos.items() if a != "hierarchical"}
        best = min(flat, key=flat.get)
        out[n] = (flat[best] / algos["hierarchical"], best)
    return out


def main(d, repeats):
    names = {"spread": "scheduler", "hostcore": "a core per host",
             "tuned": "a core per host, tuning file"}
    # A directory may hold only some configurations (first/: the first two).
    names = {p: n for p, n in names.items() if os.path.exists(f"{d}/{p}-1.txt")}
    runs = {p: [ratios(load(f"{d}/{p}-{r}.txt")) for r in range(1, repeats + 1)] for p in names}
    if not runs:
        sys.exit(f"table.py: no spread-1.txt, hostcore-1.txt or tuned-1.txt in {d}")
    print("| size | configuration | best flat / Hierarchical, per run → median | best flat |")
    print("|---:|---|---|---|")
    for n in sorted(next(iter(runs.values()))[0]):
        for placement, name in names.items():
            values = [r[n][0] for r in runs[placement]]
            best = sorted({r[n][1] for r in runs[placement]})
            print(f"| {n >> 20} MiB | {name} | {per_run(values, 2)} | {', '.join(best)} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
