#!/usr/bin/env python3
"""torch.distributed.all_reduce through concord against gloo, in the same processes.

    mpiexec.mpich -bind-to core -n 2 python3 bench/torch_allreduce.py [-m 4:64M] [-r 3] [--json F]

Each size is timed for every implementation in turn, the order rotating from round
to round (interleaved, so a change in the machine's speed hits all alike):
  concord     dist.all_reduce on the "concord" group (the default group here): its direct path
  async       the same with async_op=True, each call waited on at once: the direct path's
              lane thread and the completer
  engine      dist.all_reduce on a "concord" group made with CONCORD_TORCH_DIRECT=0: through
              concord's fusion engine
  gloo        dist.all_reduce on a gloo group of the same ranks
  concord-py  concord.allreduce (concord's own Python call, no torch) on the same bytes,
              in place: what the backend adds is concord / concord-py
  floor       dist.all_reduce on torch's FakeProcessGroup (a "fake" group of the same
              ranks, which exchanges nothing): torch's own Python and dispatcher path,
              what every backend's call costs before it does anything
A timing is the mean of a batch of calls (float32 sum), enough calls to take about
0.1 s; the figure per implementation and size is the median of the rounds' batches.
Rank 0 prints a table (time per call, gloo/concord, concord/concord-py, async/concord-py,
engine/concord-py, floor/concord-py) and writes
the JSON record (--json): machine, commit, torch version, and every batch.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from records import commit  # beside this file


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    number = text.rstrip("KMG")
    if not number.isdigit() or text[len(number):] not in units:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size like 4, 64K or 16M")
    return int(number) * units[text[len(number):]]


def size_range(spec):
    low, _, high = spec.partition(":")
    low, high = parse_size(low), parse_size(high or low)
    if low < 4 or high < low:
        raise argparse.ArgumentTypeError(f"-m {spec}: want MIN:MAX with 4 <= MIN <= MAX")
    sizes = []
    while low <= high:
        sizes.append(low)
        low *= 4
    return sizes


def report(args, impls, batches, ranks, torch_version):
    """Rank 0: the table of medians, and the JSON record (--json)."""
    rows = []
    columns = ["concord", "async", "engine", "gloo", "concord-py", "floor"]
    ratios = [("gloo", "concord"), ("concord", "concord-py"), ("async", "concord-py"),
              ("engine", "concord-py"), ("floor", "concord-py")]
    print(f"{'bytes':>10} " + " ".join(f"{c + ' us':>13}" for c in columns) + " " +
          " ".join(f"{a + '/' + b:>16}" for a, b in ratios))
    for n in args.sizes:
        med = {impl: statistics.median(batches[impl][n]) for impl in impls}
        rows.append({"bytes": n, **{f"{impl}_s": med[impl] for impl in impls},
                     **{f"{a}_over_{b}".replace("-", "_"): med[a] / med[b] for a, b in ratios},
                     "batches": {impl: batches[impl][n] for impl in impls}})
        print(f"{n:>10} " + " ".join(f"{med[c] * 1e6:>13.1f}" for c in columns) + " " +
              " ".join(f"{med[a] / med[b]:>16.2f}" for a, b in ratios))
    if args.json:
        record = {"benchmark": "bench/torch_allreduce.py", "ranks": ranks,
                  "rounds": args.rounds, "commit": commit(),
                  "torch": torch_version, "python": platform.python_version(),
                  "machine": f"{platform.node()} {os.cpu_count()} CPUs",
                  "date": time.strftime("%Y-%m-%d"), "rows": rows}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-m", "--sizes", type=size_range, default=size_range("4:64M"),
                   help="message sizes in bytes, MIN:MAX, every power of 4 (default 4:64M)")
    p.add_argument("-r", "--rounds", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--json", help="write the record here (rank 0)")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("-r must be at least 1")

    import torch
    import torch.distributed as dist
    import concord
    import concord.torch  # noqa: F401  (registers the backend, sets RANK etc.)

    torch.set_num_threads(1)
    # torch's test helper registers the "fake" backend; it ships in torch's wheel.
    import torch.testing._internal.distributed.fake_pg  # noqa: F401

    dist.init_process_group("concord")
    os.environ["CONCORD_TORCH_DIRECT"] = "0"  # read as the group is made
    engine = dist.new_group(backend="concord")
    del os.environ["CONCORD_TORCH_DIRECT"]
    gloo = dist.new_group(backend="gloo")
    fake = dist.new_group(backend="fake")
    rank, size = dist.get_rank(), dist.get_world_size()

    def run(impl, tensor, array, calls):
        if impl == "concord":
            for _ in range(calls):
                dist.all_reduce(tensor)
        elif impl == "async":
            for _ in range(calls):
                dist.all_reduce(tensor, async_op=True).wait()
        elif impl == "engine":
            for _ in range(calls):
                dist.all_reduce(tensor, group=engine)
        elif impl == "gloo":
            for _ in range(calls):
                dist.all_reduce(tensor, group=gloo)
        elif impl == "floor":
            for _ in range(calls):
                dist.all_reduce(tensor, group=fake)
        else:
            for _ in range(calls):
                concord.allreduce(array, out=array)

    def timed(impl, tensor, array, calls):
        # Every rank starts together, and the batch time is the slowest rank's.
        dist.barrier(group=gloo)
        start = time.perf_counter()
        run(impl, tensor, array, calls)
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=gloo)
        return elapsed.item() / calls

    impls = ["concord", "async", "engine", "gloo", "concord-py", "floor"]
    batches = {impl: {n: [] for n in args.sizes} for impl in impls}
    for n in args.sizes:
        tensor = torch.ones(n // 4, dtype=torch.float32)
        array = tensor.numpy()  # the same bytes
        # Calls per batch from a first, untimed try of the slowest (gloo).
        run("concord", tensor, array, 2)
        run("gloo", tensor, array, 2)
        one = timed("gloo", tensor, array, 3)
        calls = max(3, min(1000, int(0.1 / max(one, 1e-6))))
        for r in range(args.rounds):
            order = impls[r % len(impls):] + impls[:r % len(impls)]
            for impl in order:
                batches[impl][n].append(timed(impl, tensor, array, calls))

    if rank == 0:
        report(args, impls, batches, size, torch.__version__)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
