#!/usr/bin/env python3
"""DDP training throughput over the concord backend, against gloo, one process and
the machine's own ceiling for N ranks.

    bench/torch_ddp.py [--model mlp|cnn] [--batch 64] [--rounds 3] [--steps 30] [--json F]
                       [--ranks 2] [--configs concord,gloo,...]

Runs, each round in a rotating order, every configuration as its own job with every
rank pinned to a core and one torch thread per rank:
  concord   mpiexec -n N, DistributedDataParallel on the "concord" group (its buckets
            take the direct path)
  engine    the same with CONCORD_TORCH_DIRECT=0: the buckets go through concord's engine
  gloo      the same on gloo
  horovod   mpiexec -n N, concord.horovod.torch's DistributedOptimizer (no DDP)
  ceiling   mpiexec -n N, each rank training its share alone, without exchanging
            anything: what N ranks on this machine reach with free communication
  ddp-free  mpiexec -n N, DDP on the "concord" group with a comm hook that exchanges
            nothing (each bucket's future is complete at once): DDP's own cost (its
            hooks, its copies into and out of the buckets) with free communication,
            the most any backend can reach under DDP
  single    one process training the global batch
Throughput is global samples per second over the timed steps (after warm-up), the
slowest rank's time. Prints each configuration's median over the rounds and the
medians of the ratios taken within each round (concord/gloo, concord/single,
concord/ceiling, concord/ddp-free, ddp-free/ceiling, horovod/concord, concord/engine), and for
gloo the share of
its step spent in allreduce (its step against the ceiling's). Run it from the repository root;
needs concord with its torch backend.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

CONFIGS = ["concord", "engine", "gloo", "ceiling", "single", "horovod", "ddp-free"]


def make_model(name):
    """The MLP: 1.9 M parameters (7.3 MB of gradients). The CNN: two small
    convolutions and a wide dense head, 1.6 M parameters (6.5 MB), so that its
    gradients, not only its compute, are those of a model worth distributing."""
    import torch.nn as nn
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                             nn.Linear(1024, 10))
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 1024), nn.ReLU(), nn.Linear(1024, 10))


def exchange_nothing(state, bucket):
    """A DDP comm hook whose bucket is 'reduced' at once, as it is (ddp-free)."""
    import torch
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def worker(args):
    """One rank (or the single process) of a configuration; prints a JSON line."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    distributed = args.config in ("concord", "engine", "gloo", "ddp-free")
    if args.config == "engine":
        os.environ["CONCORD_TORCH_DIRECT"] = "0"
    if args.config != "single":
        import concord.torch  # noqa: F401  (RANK etc. from MPI)
    import torch.distributed as dist
    rank, size = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if distributed:
        dist.init_process_group("gloo" if args.config == "gloo" else "concord")
    torch.manual_seed(0)
    model = make_model(args.model)
    if distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model)
        if args.config == "ddp-free":
            model.register_comm_hook(None, exchange_nothing)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    hvd = None
    if args.config == "horovod":
        import concord.horovod.torch as hvd
        hvd.init()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    ranks_in_job = size if args.config != "single" else 1
    batch = args.batch * (args.ranks if args.config == "single" else 1)
    shape = (batch, 784) if args.model == "mlp" else (batch, 1, 28, 28)
    x, y = torch.randn(*shape), torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    # The ceiling's ranks exchange nothing while training, but start together and are
    # timed by the slowest, as every other configuration is: concord's own calls,
    # outside the timed steps.
    ceiling = args.config == "ceiling"
    if ceiling:
        import concord
        concord.barrier()
    if distributed:
        dist.barrier()
    if hvd:
        hvd.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    elapsed = time.perf_counter() - start
    if ceiling:
        import numpy as np
        elapsed = float(concord.allreduce(np.array([elapsed]), op="max")[0])
    if distributed:
        t = torch.tensor([elapsed], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        elapsed = t.item()
        dist.destroy_process_group()
    if hvd:
        elapsed = hvd.allreduce(torch.tensor([elapsed]), op=hvd.Max).item()
    samples = args.batch * args.ranks * args.steps
    if rank == 0:
        print(json.dumps({"config": args.config, "elapsed_s": elapsed, "ranks": ranks_in_job,
                          "samples_per_s": samples / elapsed}))


def run_job(args, config):
    me = [sys.executable, os.path.abspath(__file__), "--worker", config, "--model", args.model,
          "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
          "--ranks", str(args.ranks)]
    n = 1 if config == "single" else args.ranks
    cmd = [args.mpiexec, "-bind-to", "core", "-n", str(n)] + me
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    # torch's gloo backend can end its process with std::terminate at interpreter
    # exit (its worker thread lets go of tensors after Python has finalised),
    # after the job printed its result: the timing stands, the crash is reported.
    gloo_exit = config == "gloo" and bool(lines) and "terminate called" in out.stderr
    if out.returncode != 0 and not gloo_exit:
        sys.exit(f"torch_ddp: {config} failed:\n{out.stderr[-3000:]}")
    if out.returncode != 0:
        print(f"torch_ddp: {config}: gloo's std::terminate at exit, after its result",
              file=sys.stderr)
    return json.loads(lines[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--mpiexec", default="mpiexec.mpich")
    p.add_argument("--json")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help="the configurations to run, comma-separated (default: all; the ratios "
                        "need concord and what they compare it with)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if min(args.batch, args.rounds, args.steps, args.ranks) < 1 or args.warmup < 0:
        p.error("--batch, --rounds, --steps and --ranks must be at least 1, --warmup at least 0")
    if args.worker:
        args.config = args.worker
        return worker(args)
    configs = args.configs.split(",")
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        p.error(f"--configs: unknown {', '.join(unknown) or '(none)'}; "
                f"choose from {', '.join(CONFIGS)}")
    results = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in configs[r % len(configs):] + configs[:r % len(configs)]:
            results[c].append(run_job(args, c)["samples_per_s"])
    med = {c: statistics.median(v) for c, v in results.items()}
    # Ratios within each round (the machine's speed drifts between rounds), then
    # their median.
    def ratio(f):
        return statistics.median(f(i) for i in range(args.rounds))
    per = results
    pairs = {"concord_over_gloo": ("concord", "gloo"), "concord_over_single": ("concord", "single"),
             "concord_over_ceiling": ("concord", "ceiling"),
             "concord_over_ddp_free": ("concord", "ddp-free"),
             "ddp_free_over_ceiling": ("ddp-free", "ceiling"),
             "horovod_over_concord": ("horovod", "concord"),
             "concord_over_engine": ("concord", "engine"),
             "ceiling_over_single": ("ceiling", "single")}
    ratios = {k: ratio(lambda i, a=a, b=b: per[a][i] / per[b][i])
              for k, (a, b) in pairs.items() if a in per and b in per}
    if "gloo" in per and "ceiling" in per:
        ratios["gloo_allreduce_share"] = ratio(lambda i: 1 - per["gloo"][i] / per["ceiling"][i])
    for c in configs:
        print(f"{c:>8}: {med[c]:9.0f} samples/s  (rounds: "
              + ", ".join(f"{v:.0f}" for v in results[c]) + ")")
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            from records import provenance  # beside this file
            import torch
            json.dump({"benchmark": "bench/torch_ddp.py", **provenance(),
                       "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
                       "machine": f"{platform.node()} {os.cpu_count()} CPUs",
                       "model": args.model, "ranks": args.ranks, "steps": args.steps,
                       "per_rank_batch": args.batch, "samples_per_s": results,
                       "median": med, "ratios": ratios}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
