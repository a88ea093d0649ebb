"""Median table of bench/interposer/compare's rounds: the timer's MPI_Allreduce
without and with libconcord_mpi, and concord-bench's concord column; all are the
mean per call averaged over ranks (concord-bench's avg_us). Ratios are taken
within a round, then their median."""
import json
import statistics
import sys

out, rounds = sys.argv[1], int(sys.argv[2])


def timer(path):
    with open(path) as f:
        # "bytes avg_us max_us": the average over ranks, as concord-bench's avg_us
        rows = (line.split() for line in f if not line.startswith("#"))
        return {int(cols[0]): float(cols[1]) for cols in rows}


rows = []
for r in range(1, rounds + 1):
    with open(f"{out}/bench_{r}.json") as f:
        bench = {(rec["impl"], rec["bytes"]): rec["avg_us"] for rec in json.load(f)}
    rows.append((timer(f"{out}/mpi_{r}.txt"), timer(f"{out}/interposed_{r}.txt"), bench))

med = statistics.median
print("| bytes | MPI µs | interposed µs | MPI / interposed | concord-bench concord µs "
      "| interposed / concord-bench |")
print("|---:|---:|---:|---:|---:|---:|")
for size in sorted(rows[0][0]):
    plain = [row[0][size] for row in rows]
    inter = [row[1][size] for row in rows]
    conc = [row[2][("concord", size)] for row in rows]
    print(f"| {size} | {med(plain):.2f} | {med(inter):.2f} | "
          f"{med(p / i for p, i in zip(plain, inter)):.2f} | {med(conc):.2f} | "
          f"{med(i / c for i, c in zip(inter, conc)):.2f} |")
