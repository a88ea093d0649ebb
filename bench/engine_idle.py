#!/usr/bin/env python3
"""What an idle fusion engine costs the ranks: CPU time while nothing is submitted.

    mpiexec.mpich -bind-to core -n 2 python3 bench/engine_idle.py [-s 3] [-r 3] [--json F]

Each rank starts concord's engine (concord.init() and one allreduce_async), then,
for each of the rounds, sleeps for -s seconds on its main thread while the
engine idles, and reads the process's CPU time (user and system) over that
time: the engine's own cost, as a share of one core. Each round then times a
fixed numpy computation on the main thread (one BLAS thread), with the idle
engine beside it on the same core, against the same computation timed before
the engine started: what the idle engine takes from the application. Rank 0
prints every rank's median share and slowdown and writes the JSON record.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402  (after the BLAS thread count)

import concord  # noqa: E402
from records import provenance  # noqa: E402  (beside this file)


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def idle_share(seconds):
    """This process's CPU time over `seconds` of sleep, as a share of one core."""
    cpu, wall = cpu_seconds(), time.perf_counter()
    time.sleep(seconds)
    return (cpu_seconds() - cpu) / (time.perf_counter() - wall)


def compute_seconds(repeats=40):
    """A fixed amount of single-threaded work: repeated 256x256 matrix products."""
    rng = np.random.default_rng(0)
    a = rng.random((256, 256))
    start = time.perf_counter()
    for _ in range(repeats):
        a = a @ a
        a /= np.abs(a).max()
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-s", "--seconds", type=float, default=3.0, help="idle time per round")
    p.add_argument("-r", "--rounds", type=int, default=3)
    p.add_argument("--json", help="write the record here (rank 0)")
    args = p.parse_args()
    if args.seconds <= 0 or args.rounds < 1:
        p.error("--seconds must be positive and --rounds at least 1")
    concord.init()
    without = statistics.median(compute_seconds() for _ in range(5))
    concord.allreduce_async(np.ones(4, np.float32)).wait()  # the engine runs from here
    shares, slowdowns = [], []
    for _ in range(args.rounds):
        shares.append(idle_share(args.seconds))
        slowdowns.append(statistics.median(compute_seconds() for _ in range(5)) / without)
    mine = {"rank": concord.rank(), "idle_cpu_share": shares, "compute_slowdown": slowdowns}
    everyone = concord.allgather(np.frombuffer(json.dumps(mine).encode().ljust(4096), np.uint8))
    rows = [json.loads(bytes(r).decode().strip()) for r in everyone.reshape(concord.size(), -1)]
    if concord.rank() != 0:
        return 0
    for row in rows:
        print(f"rank {row['rank']}: idle engine {100 * statistics.median(row['idle_cpu_share']):.1f} %"
              f" of a core; computation beside it {statistics.median(row['compute_slowdown']):.3f}x"
              " its time without the engine")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"benchmark": "bench/engine_idle.py", **provenance(),
                       "date": time.strftime("%Y-%m-%d"),
                       "machine": f"{platform.node()} {os.cpu_count()} CPUs",
                       "ranks": concord.size(), "seconds": args.seconds, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
