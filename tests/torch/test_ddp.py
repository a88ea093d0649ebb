"""DistributedDataParallel and FSDP2 over the "concord" backend, unchanged,
against one process training the same model on the global batch (computed here,
without communication)."""
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from ddp_reference import PER_RANK_BATCH, batches, make_model, max_relative_difference, train_both

def test_ddp_float64_matches_one_process(group):
    ddp, reference = train_both(torch.float64)
    assert max_relative_difference(ddp.module, reference) <= 1e-12


def test_ddp_float32_matches_within_rounding(group, path):
    # Small buckets: several allreduces per step, in flight together.
    ddp, reference = train_both(torch.float32, bucket_cap_mb=0.001, process_group=path)
    assert max_relative_difference(ddp.module, reference) <= 1e-5


def test_ddp_buckets_go_through_concord(group):
    # The first step fills one bucket of up to 1 MB; DDP then rebuilds its
    # buckets at bucket_cap_mb (1 KB here), several, each one of concord's
    # allreduces.
    ddp = DDP(make_model(torch.float32), bucket_cap_mb=0.001)
    x, y = batches(1, PER_RANK_BATCH, torch.float32)[0]
    F.mse_loss(ddp(x), y).backward()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        F.mse_loss(ddp(x), y).backward()
    names = [e.name for e in prof.events()]
    assert names.count("concord:all_reduce") >= 2, sorted(set(names))


def test_ddp_join_with_uneven_inputs(group, path):
    """Rank r has 3 + r batches. Under Join, a rank that ran out shadows the
    others' allreduces with zeros, and gradients are divided by the initial
    world size: the reference sums the gradients of the ranks that still have
    data and divides by the world size."""
    from torch.distributed.algorithms.join import Join

    size, rank = dist.get_world_size(), dist.get_rank()
    dtype = torch.float64
    counts = [3 + r for r in range(size)]
    data = batches(max(counts), PER_RANK_BATCH * size, dtype)
    ddp = DDP(make_model(dtype), process_group=path)
    reference = make_model(dtype)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05)
    with Join([ddp]):
        for x, y in data[:counts[rank]]:
            mine = slice(rank * PER_RANK_BATCH, (rank + 1) * PER_RANK_BATCH)
            opt.zero_grad()
            F.mse_loss(ddp(x[mine]), y[mine]).backward()
            opt.step()
    for step, (x, y) in enumerate(data):
        ref_opt.zero_grad()
        for r in range(size):
            if step < counts[r]:
                part = slice(r * PER_RANK_BATCH, (r + 1) * PER_RANK_BATCH)
                F.mse_loss(reference(x[part]), y[part]).backward()
        for p in reference.parameters():
            p.grad /= size
        ref_opt.step()
    # Only the ranks that trained every step have the reference's weights:
    # a joined rank stops stepping its optimizer.
    if counts[rank] == max(counts):
        assert max_relative_difference(ddp.module, reference) <= 1e-12


def test_fsdp2_matches_one_process(group):
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    from torch.distributed.device_mesh import init_device_mesh

    size, rank = dist.get_world_size(), dist.get_rank()
    dtype = torch.float32
    mesh = init_device_mesh("cpu", (size,))
    model = make_model(dtype)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fsdp.fully_shard(layer, mesh=mesh)
    fsdp.fully_shard(model, mesh=mesh)
    reference = make_model(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05)
    for x, y in batches(10, PER_RANK_BATCH * size, dtype):
        mine = slice(rank * PER_RANK_BATCH, (rank + 1) * PER_RANK_BATCH)
        opt.zero_grad()
        F.mse_loss(model(x[mine]), y[mine]).backward()
        opt.step()
        ref_opt.zero_grad()
        F.mse_loss(reference(x), y).backward()
        ref_opt.step()
    worst = 0.0
    for p, q in zip(model.parameters(), reference.parameters()):
        full = p.full_tensor().detach()
        worst = max(worst, ((full - q.detach()).abs().max() / q.detach().abs().max()).item())
    assert worst <= 1e-5
