"""concord-bench allreduce outputs of several runs as a markdown table: concord's
median latency, another MPI's time over concord's per run and median, the copy
path over concord (when the runs have concord-copy) and concord's % of the
same-run roofline.

    python3 table.py "MPICH" mpich-1.txt mpich-2.txt mpich-3.txt
"""
import collections
import statistics
import sys


def load(path):
    """{size: {impl: (latency us, % of roofline)}} from one concord-bench output; the % is
    None in a run without the roofline (rows of 5 fields)."""
    rows = collections.defaultdict(dict)
    for line in open(path):
        p = line.split()
        if len(p) >= 5 and p[0].isdigit():
            rows[int(p[0])][p[3]] = (float(p[1]), float(p[5]) if len(p) >= 6 else None)
    return rows


def size_name(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else f"{n} B"


def per_run(values, digits):
    return f"{' / '.join(f'{x:.{digits}f}' for x in values)} → {statistics.median(values):.{digits}f}"


def main(other, files):
    runs = [load(f) for f in files]
    copy = "concord-copy:auto" in runs[0][4]
    print(f"| size | concord µs (median) | {other} / concord, per run → median |"
          + (" old copy path / concord, median |" if copy else "")
          + " concord % of roofline, per run → median |")
    print("|---:|---:|---|" + ("---:|" if copy else "") + "---|")
    for n in sorted(runs[0]):
        ours = [r[n]["concord:auto"] for r in runs]
        row = (f"| {size_name(n)} | {statistics.median(c[0] for c in ours):.1f} | "
               f"{per_run([r[n]['mpi'][0] / c[0] for r, c in zip(runs, ours)], 2)} |")
        if copy:
            ratio = statistics.median(r[n]["concord-copy:auto"][0] / c[0] for r, c in zip(runs, ours))
            row += f" {ratio:.2f} |"
        print(row + f" {per_run([c[1] for c in ours], 0)} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
