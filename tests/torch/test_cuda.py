"""The "concord" backend with CUDA tensors, on a GPU node (skipped elsewhere, failed
instead with CONCORD_TEST_REQUIRE_CUDA=1): all_reduce and broadcast against references
computed here from every rank's inputs, and DDP on the GPU against one process training
on the global batch. Ranks may share one GPU (under MPS). Run by scripts/device-check's
torch stage."""
import os

import pytest
import torch
import torch.distributed as dist

from ddp_reference import max_relative_difference, train_both

if not torch.cuda.is_available():
    if os.environ.get("CONCORD_TEST_REQUIRE_CUDA"):
        raise RuntimeError("CONCORD_TEST_REQUIRE_CUDA is set, but torch sees no GPU")
    pytest.skip("no GPU", allow_module_level=True)


@pytest.fixture(scope="module")
def device(group):
    d = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(d)
    return d


def rank_input(rank, n, dtype, device):
    """Small integers, exact in every dtype."""
    values = (torch.arange(n, dtype=torch.int64) * 5 + rank * 3) % 4 + 1
    return values.to(dtype).to(device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int32], ids=str)
@pytest.mark.parametrize("n", [1, 1000, 1 << 20])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_cuda_allreduce(device, dtype, n, op):
    size, rank = dist.get_world_size(), dist.get_rank()
    t = rank_input(rank, n, dtype, device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    inputs = torch.stack([rank_input(r, n, torch.float64, "cpu") for r in range(size)])
    expected = inputs.sum(0) if op == "sum" else inputs.max(0).values
    assert t.device == device
    assert torch.equal(t.cpu().double(), expected)  # small integers: exact in every dtype


def test_cuda_allreduce_in_stream_order(device):
    # The input is written by a kernel still queued on the current stream when the call
    # comes, and the result is read by the next kernel on it.
    size = dist.get_world_size()
    x = torch.zeros(1 << 22, device=device)
    torch.cuda._sleep(50_000_000)  # keeps the stream busy, so a read out of order shows
    x.add_(dist.get_rank() + 1)
    dist.all_reduce(x)
    y = x * 2
    assert torch.equal(y.cpu(), torch.full((1 << 22,), 2.0 * size * (size + 1) / 2))


def test_cuda_broadcast(device):
    for root in range(dist.get_world_size()):
        t = torch.full((1000,), float(dist.get_rank()), device=device)
        dist.broadcast(t, src=root)
        assert torch.equal(t.cpu(), torch.full((1000,), float(root)))


def test_ddp_on_the_gpu_matches_one_process(device):
    ddp, reference = train_both(torch.float64, device=device)
    assert max_relative_difference(ddp.module, reference) <= 1e-12
