"""Two concord impls of the same runs (bench/results-direct-done/no-done.diff): per size, the
first impl's time over the second's and MPI's over the second's (per run → median), and the
second's median latency.

    python3 cmp.py concord-old:auto concord:auto mpich-1.txt mpich-2.txt mpich-3.txt mpich-4.txt
"""
import pathlib
import statistics
import sys

# The records' loader and formatting, shared with the other result folders.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "results-rounds"))
import table as rounds_table  # noqa: E402


def main(old, new, files):
    runs = [rounds_table.load(f) for f in files]  # {size: {impl: (µs, roofline %)}}
    print(f"| size | {old} / {new}, per run → median | MPI / {new}, per run → median | {new} µs |")
    print("|---:|---|---|---:|")
    for n in sorted(runs[0]):
        ratio = [r[n][old][0] / r[n][new][0] for r in runs]
        mpi = [r[n]["mpi"][0] / r[n][new][0] for r in runs]
        print(f"| {rounds_table.size_name(n)} | {rounds_table.per_run(ratio, 2)} |"
              f" {rounds_table.per_run(mpi, 2)} | {statistics.median(r[n][new][0] for r in runs):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
