#!/usr/bin/env python3
"""torch.distributed.all_reduce through concord against gloo, in the same processes.

    mpiexec.mpich -bind-to core -n 2 python3 bench/torch_allreduce.py [-m 4:64M] [-r 3] [--json F]
    mpiexec -n 2 python3 bench/torch_allreduce.py --device cuda [--tag mps=on] ...   (GPU node)

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
With --device cuda the tensors are on the GPU (this rank's LOCAL_RANK modulo the GPUs; ranks
may share one), concord-py and engine are left out (a CUDA tensor always takes the engine), and
  nccl        dist.all_reduce on an NCCL group of the same ranks, where NCCL initialises
              (two ranks on one GPU need NCCL 2.30 or later and NCCL_MULTI_RANK_GPU_ENABLE=1;
              where it fails, the table says why and goes on without it)
is timed beside concord, async, gloo and the floor.
A timing is the mean of a batch of calls (float32 sum), enough calls to take about
0.1 s, timed as nccl-tests does: the calls back to back, then one synchronisation of the
device; the figure per implementation and size is the median of the rounds' batches,
and a ratio of two implementations the median of their rounds' ratios (each round's
batches side by side). Rank 0 prints a table (time per call, gloo/concord,
concord/concord-py, async/concord-py, engine/concord-py, floor/concord-py) and writes
the JSON record (--json): machine, commit, torch version, the GPU and NCCL versions, the
--tag values, and every batch.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time


from records import provenance  # beside this file


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    number = text.rstrip("KMG")
    if not number.isdigit() or text[len(number):] not in units:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size like 4, 64K or 16M")
    return int(number) * units[text[len(number):]]


def size_range(spec):
    """MIN, 4 x MIN, ... up to MAX. The tensors are float32, so a size that is not a whole
    number of elements, or a MAX the steps never land on, is refused: the records would
    name bytes that were not reduced, or leave the largest size out."""
    low, _, high = spec.partition(":")
    low, high = parse_size(low), parse_size(high or low)
    if low < 4 or high < low:
        raise argparse.ArgumentTypeError(f"-m {spec}: want MIN:MAX with 4 <= MIN <= MAX")
    if low % 4 != 0:
        raise argparse.ArgumentTypeError(
            f"-m {spec}: MIN {low} bytes is not a whole number of 4-byte (float32) elements")
    sizes = [low]
    while sizes[-1] * 4 <= high:
        sizes.append(sizes[-1] * 4)
    if sizes[-1] != high:
        raise argparse.ArgumentTypeError(
            f"-m {spec}: sizes go up by 4x from MIN {low} and never reach MAX {high}; "
            f"MAX must be MIN times a power of 4, e.g. -m {low}:{sizes[-1]} or "
            f"-m {low}:{sizes[-1] * 4}")
    return sizes


COLUMNS = ["concord", "async", "engine", "nccl", "gloo", "concord-py", "floor"]
RATIOS = [("gloo", "concord"), ("nccl", "concord"), ("concord", "concord-py"),
          ("async", "concord-py"), ("engine", "concord-py"), ("floor", "concord-py")]


def round_ratio(a, b):
    """The median over rounds of a's batch time over b's in the same round. Both
    ran minutes apart at most, so a change in the machine's speed between rounds
    cancels out, which it does not in the ratio of the two medians."""
    return statistics.median(x / y for x, y in zip(a, b))


def report(args, impls, batches, ranks, facts):
    """Rank 0: the table of medians, and the JSON record (--json)."""
    columns = [c for c in COLUMNS if c in impls]
    ratios = [(a, b) for a, b in RATIOS if a in impls and b in impls]
    print(f"{'bytes':>10} " + " ".join(f"{c + ' us':>13}" for c in columns) + " " +
          " ".join(f"{a + '/' + b:>16}" for a, b in ratios))
    rows = []
    for n in args.sizes:
        med = {impl: statistics.median(batches[impl][n]) for impl in impls}
        ratio = {(a, b): round_ratio(batches[a][n], batches[b][n]) for a, b in ratios}
        rows.append({"bytes": n, **{f"{impl}_s": med[impl] for impl in impls},
                     **{f"{a}_over_{b}".replace("-", "_"): ratio[a, b] for a, b in ratios},
                     "batches": {impl: batches[impl][n] for impl in impls}})
        print(f"{n:>10} " + " ".join(f"{med[c] * 1e6:>13.1f}" for c in columns) + " " +
              " ".join(f"{ratio[a, b]:>16.2f}" for a, b in ratios))
    if args.json:
        record = {"benchmark": "bench/torch_allreduce.py", "ranks": ranks,
                  "rounds": args.rounds, **provenance(), "device": args.device,
                  "python": platform.python_version(),
                  "machine": f"{platform.node()} {os.cpu_count()} CPUs",
                  "date": time.strftime("%Y-%m-%d"), **facts,
                  "tags": dict(t.split("=", 1) for t in args.tag), "rows": rows}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)


def tag(text):
    if "=" not in text or not text.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"--tag {text}: want KEY=VALUE")
    return text


def nccl_group(dist, torch, device):
    """An NCCL group of every rank, and why not where NCCL does not initialise."""
    try:
        group = dist.new_group(backend="nccl")
        probe = torch.ones(1, device=device)
        dist.all_reduce(probe, group=group)
        torch.cuda.synchronize(device)
        return group, None
    except Exception as e:  # NCCL's refusal (two ranks on one GPU, an old NCCL) is reported
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-m", "--sizes", type=size_range, default=size_range("4:64M"),
                   help="message sizes in bytes, MIN:MAX: MIN, 4 x MIN, ... MAX (MIN a multiple of 4, "
                        "MAX MIN times a power of 4; default 4:64M)")
    p.add_argument("-r", "--rounds", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="where the tensors are (default cpu)")
    p.add_argument("--tag", type=tag, action="append", default=[],
                   help="KEY=VALUE recorded in the JSON (how it ran: mps=on, ...); repeatable")
    p.add_argument("--json", help="write the record here (rank 0)")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("-r must be at least 1")
    keys = [t.split("=", 1)[0] for t in args.tag]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:  # the record would keep the last value only
        p.error(f"--tag {', '.join(twice)}: given twice")
    return args


def make_groups(torch, dist, device):
    """The groups every implementation runs on, what is timed, and the facts of the record."""
    dist.init_process_group("concord")
    os.environ["CONCORD_TORCH_DIRECT"] = "0"  # read as the group is made
    groups = {"concord": None, "engine": dist.new_group(backend="concord")}
    del os.environ["CONCORD_TORCH_DIRECT"]
    groups["gloo"] = dist.new_group(backend="gloo")
    groups["floor"] = dist.new_group(backend="fake")
    facts = {"torch": torch.__version__}
    if device.type != "cuda":
        return groups, ["concord", "async", "engine", "gloo", "concord-py", "floor"], facts
    impls = ["concord", "async", "gloo", "floor"]
    facts["gpu"] = torch.cuda.get_device_name(device)
    facts["cuda"] = torch.version.cuda
    groups["nccl"], why = nccl_group(dist, torch, device)
    facts["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    facts["nccl_env"] = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    if groups["nccl"] is not None:
        impls.insert(2, "nccl")
    else:
        facts["nccl_failed"] = why
        if dist.get_rank() == 0:
            print(f"torch_allreduce: no NCCL group ({why}); timing the others", flush=True)
    return groups, impls, facts


def measure(args, torch, dist, device, groups, impls):
    """Every size, every implementation, in rotating order: the batches' mean times."""
    import concord
    cuda = device.type == "cuda"

    def run(impl, tensor, array, calls):
        if impl == "concord-py":
            for _ in range(calls):
                concord.allreduce(array, out=array)
        elif impl == "async":
            for _ in range(calls):
                dist.all_reduce(tensor, async_op=True).wait()
        else:
            for _ in range(calls):
                dist.all_reduce(tensor, group=groups[impl])

    def timed(impl, tensor, array, calls):
        # Every rank starts together, and the batch time is the slowest rank's.
        if cuda:
            torch.cuda.synchronize(device)
        dist.barrier(group=groups["gloo"])
        start = time.perf_counter()
        run(impl, tensor, array, calls)
        if cuda:
            torch.cuda.synchronize(device)  # asynchronous calls end on the device, not at enqueue
        elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=groups["gloo"])
        return elapsed.item() / calls

    batches = {impl: {n: [] for n in args.sizes} for impl in impls}
    for n in args.sizes:
        tensor = torch.ones(n // 4, dtype=torch.float32, device=device)
        array = None if cuda else tensor.numpy()  # the same bytes
        # Calls per batch from a first, untimed try of the slowest (gloo).
        run("concord", tensor, array, 2)
        run("gloo", tensor, array, 2)
        one = timed("gloo", tensor, array, 3)
        calls = max(3, min(1000, int(0.1 / max(one, 1e-6))))
        for r in range(args.rounds):
            order = impls[r % len(impls):] + impls[:r % len(impls)]
            for impl in order:
                batches[impl][n].append(timed(impl, tensor, array, calls))
    return batches


def main():
    args = parse_args()
    import torch
    import torch.distributed as dist
    import concord.torch  # noqa: F401  (registers the backend, sets RANK etc.)

    torch.set_num_threads(1)
    # torch's test helper registers the "fake" backend; it ships in torch's wheel.
    import torch.testing._internal.distributed.fake_pg  # noqa: F401

    device = torch.device("cpu")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("torch_allreduce: --device cuda, but torch sees no GPU")
        device = torch.device("cuda",
                              int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    groups, impls, facts = make_groups(torch, dist, device)
    batches = measure(args, torch, dist, device, groups, impls)
    if dist.get_rank() == 0:
        report(args, impls, batches, dist.get_world_size(), facts)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
