#!/usr/bin/env python3
"""Measures concord's allreduce algorithms against each other and writes the Auto
crossover table (the format of src/collectives/tuning_default.json).

For each rank count it runs, under mpiexec, one concord-bench process that times
ring, recursive doubling and reduce-scatter+allgather interleaved size by size,
takes the fastest algorithm per size (after smoothing out single-size flips) and
turns the winners into byte thresholds. Usage:

    bench/tune_allreduce.py --bench build/concord-bench --ranks 2,3,4 \
        --output src/collectives/tuning_default.json

The last rank count measured also covers every larger one. Rebuild after
replacing the built-in table, or point CONCORD_TUNING_FILE at the output.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

ALGORITHMS = ["recursive_doubling", "reduce_scatter_allgather", "ring"]


def measure(bench, mpiexec, ranks, max_bytes, iterations, dtype):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [mpiexec, "-n", str(ranks), bench, "allreduce", "--impl", "concord",
           "--algo", ",".join(ALGORITHMS), "-m", f"4:{max_bytes}", "-T", dtype,
           "--json", path]
    if iterations:
        cmd += ["-i", str(iterations)]
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    with open(path) as f:
        records = json.load(f)
    os.unlink(path)
    return records


def winners(records):
    """Fastest algorithm per size, sorted by size, with single-size flips smoothed."""
    by_size = {}
    for r in records:
        by_size.setdefault(r["bytes"], {})[r["algorithm"]] = r["avg_us"]
    sizes = sorted(by_size)
    best = [min(by_size[s], key=by_size[s].get) for s in sizes]
    for i in range(1, len(best) - 1):
        if best[i - 1] == best[i + 1] != best[i]:
            best[i] = best[i - 1]
    return sizes, best, by_size


def thresholds(sizes, best):
    out = []
    for i, (size, algo) in enumerate(zip(sizes, best)):
        last = i == len(sizes) - 1
        if last or best[i + 1] != algo:
            out.append({"max_bytes": None if last else size, "algorithm": algo})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="build/concord-bench")
    ap.add_argument("--mpiexec", default="mpiexec.mpich")
    ap.add_argument("--ranks", default="2,3,4", help="comma list of rank counts")
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--iterations", type=int, default=0, help="0: OSU defaults")
    ap.add_argument("-T", "--dtype", default="float32")
    ap.add_argument("--output", required=True)
    args = ap.parse_args()

    rank_counts = [int(x) for x in args.ranks.split(",")]
    rules = []
    report = []
    for i, p in enumerate(rank_counts):
        records = measure(args.bench, args.mpiexec, p, args.max_bytes, args.iterations, args.dtype)
        sizes, best, by_size = winners(records)
        rule = {"max_ranks": None if i == len(rank_counts) - 1 else p,
                "algorithms": thresholds(sizes, best)}
        rules.append(rule)
        report.append((p, sizes, best, by_size))

    table = {
        "description": (f"Measured by bench/tune_allreduce.py on {platform.node() or 'this machine'} "
                        f"({os.cpu_count()} cores), dtype {args.dtype}, ranks {args.ranks}"),
        "command": " ".join(["bench/tune_allreduce.py"] + sys.argv[1:]),
    }
    # This script measures the crossovers only: the size thresholds of the table
    # it replaces (docs/ALGORITHMS.md) are kept.
    if os.path.exists(args.output):
        with open(args.output) as f:
            previous = json.load(f)
        if "thresholds" in previous:
            table["thresholds"] = previous["thresholds"]
    table["rules"] = rules
    with open(args.output, "w") as f:
        json.dump(table, f, indent=2)
        f.write("\n")

    # A Markdown table of the measurement for docs/ALGORITHMS.md.
    for p, sizes, best, by_size in report:
        print(f"\n#### {p} ranks (avg latency, us)\n")
        # fastest: this run's minimum; chosen: what the table takes after
        # single-size flips are smoothed (one noisy size must not add a crossover).
        print("| bytes | " + " | ".join(ALGORITHMS) + " | fastest | chosen |")
        print("|---:|" + "---:|" * len(ALGORITHMS) + "---|---|")
        for s, b in zip(sizes, best):
            cells = " | ".join(f"{by_size[s][a]:.1f}" for a in ALGORITHMS)
            fastest = min(by_size[s], key=by_size[s].get)
            print(f"| {s} | {cells} | {fastest} | {b} |")
    print(f"\nwrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
