"""Median table of bench/interposer/compare's rounds: the timer's MPI_Allreduce
without and with libconcord_mpi, and concord-bench's concord and mpi columns;
ratios are taken within a round, then their median."""
import json
import statistics
import sys

out, rounds = sys.argv[1], int(sys.argv[2])


def timer(path):
    with open(path) as f:
        return {int(b): float(t) for b, t in (line.split() for line in f if not line.startswith("#"))}


rows = []
for r in range(1, rounds + 1):
    with open(f"{out}/bench_{r}.json") as f:
        bench = {(rec["impl"], rec["bytes"]): rec["avg_us"] for rec in json.load(f)}
    rows.append((timer(f"{out}/mpi_{r}.txt"), timer(f"{out}/interposed_{r}.txt"), bench))

med = statistics.median
print("| bytes | MPI µs | interposed µs | MPI / interposed | concord-bench concord µs "
      "| interposed / concord-bench | concord-bench mpi / concord |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for size in sorted(rows[0][0]):
    plain = [row[0][size] for row in rows]
    inter = [row[1][size] for row in rows]
    conc = [row[2][("concord", size)] for row in rows]
    bmpi = [row[2][("mpi", size)] for row in rows]
    print(f"| {size} | {med(plain):.2f} | {med(inter):.2f} | "
          f"{med(p / i for p, i in zip(plain, inter)):.2f} | {med(conc):.2f} | "
          f"{med(i / c for i, c in zip(inter, conc)):.2f} | "
          f"{med(m / c for m, c in zip(bmpi, conc)):.2f} |")
