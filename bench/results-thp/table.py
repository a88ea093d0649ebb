"""Tables of run.sh's outputs, THP "madvise" (4 KiB pages) against "always" (2 MiB):
memcpy's time over process_vm_readv's (cma) per run, and for the allreduce concord's
share of the roofline on ordinary and on shared buffers and MPICH's time over concord's.
    python3 bench/results-thp/table.py OUTDIR"""
import pathlib
import statistics
import sys

out = pathlib.Path(sys.argv[1])
MODES = ("madvise", "always")


def rows(path):
    """Numeric lines of a concord-bench table, as lists of fields."""
    lines = [l.split() for l in path.read_text().splitlines()]
    return [f for f in lines if f and f[0].isdigit()]


def runs(kind, mode):
    files = sorted(out.glob(f"{kind}-{mode}-*.txt"))
    if not files:
        sys.exit(f"{out}: no {kind}-{mode}-*.txt")
    return [rows(f) for f in files]


def cell(values, fmt):
    return " / ".join(fmt.format(v) for v in values) + " → " + fmt.format(statistics.median(values))


def memcpy_table():
    print("| size | memcpy / cma, madvise: per run → median | ... always |")
    print("|---:|---|---|")
    per_mode = {m: [{int(f[0]): float(f[4]) for f in run} for run in runs("memcpy", m)] for m in MODES}
    for size in sorted(per_mode["madvise"][0]):
        print(f"| {size >> 10} KiB | " +
              " | ".join(cell([run[size] for run in per_mode[m]], "{:.2f}") for m in MODES) + " |")


def allreduce_table():
    def measures(run):
        t = {(int(f[0]), f[3]): float(f[1]) for f in run}
        return {s: (100 * t[(s, "roofline")] / t[(s, "concord:auto")],
                    100 * t[(s, "roofline")] / t[(s, "concord-shared:auto")],
                    t[(s, "mpi")] / t[(s, "concord:auto")])
                for (s, impl) in t if impl == "concord:auto"}
    per_mode = {m: [measures(run) for run in runs("allreduce", m)] for m in MODES}
    names = ("concord % of roofline", "concord-shared % of roofline", "MPICH / concord")
    head = " | ".join(f"{n}, {m}" for n in names for m in MODES)
    print(f"| size | {head} |")
    print("|---:|" + "---|" * (2 * len(names)))
    for size in sorted(per_mode["madvise"][0]):
        cells = [cell([run[size][k] for run in per_mode[m]], "{:.0f}" if k < 2 else "{:.2f}")
                 for k in range(len(names)) for m in MODES]
        print(f"| {size >> 10} KiB | " + " | ".join(cells) + " |")


memcpy_table()
print()
allreduce_table()
