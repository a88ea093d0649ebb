"""What the DDP tests compare against (test_ddp.py, and test_cuda.py on a GPU): a
small model, its batches, and one process training it on the global batch beside
DDP, computed without communication."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

PER_RANK_BATCH = 6
STEPS = 20


def make_model(dtype):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 4)).to(dtype)


def batches(steps, rows, dtype):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(rows, 8, generator=g, dtype=dtype),
             torch.randn(rows, 4, generator=g, dtype=dtype)) for _ in range(steps)]


def max_relative_difference(model, reference):
    worst = 0.0
    for p, q in zip(model.parameters(), reference.parameters()):
        scale = q.detach().abs().max().item() or 1.0
        worst = max(worst, (p.detach() - q.detach()).abs().max().item() / scale)
    return worst


def train_both(dtype, bucket_cap_mb=25, process_group=None, device=torch.device("cpu")):
    """DDP over `process_group` (the default group: None) and one process on the
    global batch, STEPS of SGD with momentum, on `device`."""
    size, rank = dist.get_world_size(), dist.get_rank()
    cuda = device.type == "cuda"
    ddp = DDP(make_model(dtype).to(device), bucket_cap_mb=bucket_cap_mb,
              process_group=process_group, device_ids=[device.index] if cuda else None)
    reference = make_model(dtype).to(device)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    for x, y in batches(STEPS, PER_RANK_BATCH * size, dtype):
        x, y = x.to(device), y.to(device)
        mine = slice(rank * PER_RANK_BATCH, (rank + 1) * PER_RANK_BATCH)
        opt.zero_grad()
        F.mse_loss(ddp(x[mine]), y[mine]).backward()
        opt.step()
        ref_opt.zero_grad()
        F.mse_loss(reference(x), y).backward()  # the global batch in one process
        ref_opt.step()
    return ddp, reference
