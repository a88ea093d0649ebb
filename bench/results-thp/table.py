"""Tables of run.sh's outputs, THP "madvise" against "always": process_vm_readv's (cma) time
over memcpy's per run (memcpy GB/s over cma GB/s), and for the allreduce concord's share of the
roofline on ordinary and on shared buffers and MPICH's time over concord's.
    python3 bench/results-thp/table.py OUTDIR"""
import pathlib
import re
import sys

# The per-run → median formatting shared with the other result folders.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "results-rounds"))
import table as rounds_table  # noqa: E402

MODES = ("madvise", "always")
IMPLS = ("concord:auto", "concord-shared:auto", "mpi", "roofline")


def rows(path, fields):
    """Numeric lines of a concord-bench table, as lists of at least `fields` fields."""
    lines = [l.split() for l in path.read_text().splitlines()]
    found = [f for f in lines if f and f[0].isdigit()]
    if not found:
        sys.exit(f"{path}: no table rows (did the run fail?)")
    short = [f for f in found if len(f) < fields]
    if short:
        sys.exit(f"{path}: a row with fewer than {fields} fields: {' '.join(short[0])}")
    return found


def runs(out, kind, mode, fields):
    """Every run of one kind and mode, in the order of their run numbers."""
    files = [(int(m[1]), f) for f in out.glob(f"{kind}-{mode}-*.txt")
             if (m := re.fullmatch(rf"{kind}-{mode}-(\d+)", f.stem))]
    if not files:
        sys.exit(f"{out}: no {kind}-{mode}-N.txt")
    return [(f, rows(f, fields)) for _, f in sorted(files)]


def same_sizes(per_mode):
    """The sizes of every run, which must all have the same sizes and the modes the same
    number of runs; a run that lacks a size is named with it."""
    counts = {mode: len(per_mode[mode]) for mode in MODES}
    if len(set(counts.values())) != 1:
        sys.exit(f"runs per mode differ: {counts} (an interrupted run.sh?)")
    every = sorted({s for mode in MODES for _, table in per_mode[mode] for s in table})
    for mode in MODES:
        for f, table in per_mode[mode]:
            missing = [s for s in every if s not in table]
            if missing:
                sys.exit(f"{f}: no row for {', '.join(map(str, missing))} bytes")
    return every


def memcpy_table(out):
    per_mode = {m: [(f, {int(r[0]): float(r[4]) for r in table})
                    for f, table in runs(out, "memcpy", m, 5)] for m in MODES}
    sizes = same_sizes(per_mode)
    print("| size | memcpy / cma, madvise: per run → median | ... always |")
    print("|---:|---|---|")
    for size in sizes:
        cells = [rounds_table.per_run([t[size] for _, t in per_mode[m]], 2) for m in MODES]
        print(f"| {size >> 10} KiB | " + " | ".join(cells) + " |")


def allreduce_measures(f, table):
    t = {(int(r[0]), r[3]): float(r[1]) for r in table}
    result = {}
    for size in sorted({s for s, _ in t}):
        missing = [i for i in IMPLS if (size, i) not in t]
        if missing:
            sys.exit(f"{f}: size {size} lacks {', '.join(missing)}")
        c, shared, mpi, roof = (t[(size, i)] for i in IMPLS)
        result[size] = (100 * roof / c, 100 * roof / shared, mpi / c)
    return result


def allreduce_table(out):
    per_mode = {m: [(f, allreduce_measures(f, table)) for f, table in runs(out, "allreduce", m, 4)]
                for m in MODES}
    names = ("concord % of roofline", "concord-shared % of roofline", "MPICH / concord")
    sizes = same_sizes(per_mode)
    print("| size | " + " | ".join(f"{n}, {m}" for n in names for m in MODES) + " |")
    print("|---:|" + "---|" * (2 * len(names)))
    for size in sizes:
        cells = [rounds_table.per_run([t[size][k] for _, t in per_mode[m]], 0 if k < 2 else 2)
                 for k in range(len(names)) for m in MODES]
        print(f"| {size >> 10} KiB | " + " | ".join(cells) + " |")


if len(sys.argv) != 2:
    sys.exit(__doc__)
out_dir = pathlib.Path(sys.argv[1])
memcpy_table(out_dir)
print()
allreduce_table(out_dir)
