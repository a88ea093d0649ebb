"""concord-bench allreduce outputs with concord-shared (buffers from allocate_shared) as a
markdown table: its median latency, ordinary concord's time over it, the MPI's time over
it (per run and median), the % of the same-run roofline of both, and, where the runs have
concord-shared-pull (bench/results-shared-heap/pull.diff), its time over concord-shared, and
where they have mpi-shared (MPI_Allreduce on the same shared buffers), its time over mpi's.

    python3 table.py "MPICH" issue11/mpich-1.txt issue11/mpich-2.txt issue11/mpich-3.txt
"""
import importlib.util
import pathlib
import statistics
import sys

_spec = importlib.util.spec_from_file_location(
    "rounds_table", pathlib.Path(__file__).resolve().parent.parent / "results-rounds" / "table.py")
rounds_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rounds_table)
load, per_run, size_name = rounds_table.load, rounds_table.per_run, rounds_table.size_name

SHARED = "concord-shared:auto"
ORDINARY = "concord:auto"
PULL = "concord-shared-pull:auto"
MPI_SHARED = "mpi-shared"


def main(other, files):
    runs = [load(f) for f in files]
    pull = PULL in runs[0][min(runs[0])]
    mpi_shared = MPI_SHARED in runs[0][min(runs[0])]
    print(f"| size | shared µs (median) | ordinary / shared, per run → median | {other} / shared,"
          " per run → median | shared % of roofline, per run → median |"
          " ordinary % of roofline (median) |" + (" pull / push, per run → median |" if pull else "")
          + (f" {other} on shared / on ordinary buffers, per run → median |" if mpi_shared else ""))
    print("|---:|---:|---|---|---|---:|" + ("---|" if pull else "") + ("---|" if mpi_shared else ""))
    for n in sorted(runs[0]):
        shared = [r[n][SHARED] for r in runs]
        ordinary = [r[n][ORDINARY] for r in runs]
        mpi = [r[n]["mpi"] for r in runs]
        row = (f"| {size_name(n)} | {statistics.median(s[0] for s in shared):.1f} | "
               f"{per_run([o[0] / s[0] for o, s in zip(ordinary, shared)], 2)} | "
               f"{per_run([m[0] / s[0] for m, s in zip(mpi, shared)], 2)} | "
               f"{per_run([s[1] for s in shared], 0)} | "
               f"{statistics.median(o[1] for o in ordinary):.0f} |")
        if pull:
            row += f" {per_run([r[n][PULL][0] / s[0] for r, s in zip(runs, shared)], 2)} |"
        if mpi_shared:
            row += f" {per_run([r[n][MPI_SHARED][0] / r[n]['mpi'][0] for r in runs], 2)} |"
        print(row)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
