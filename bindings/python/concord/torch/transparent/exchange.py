"""The tensors the torch transparent mode moves over ranks, through concord's
torch.distributed backend: gradients averaged with one all_reduce per dtype
and device (a flattened buffer: one collective a step however many variables
the model has), state broadcast from rank 0 in one buffer per device, and
gradients summed locally over K backward passes (--accumulate)."""
from __future__ import annotations

import torch
import torch.distributed as dist


def _groups(tensors):
    """Indices of the tensors by (dtype, device)."""
    groups = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.dtype, t.device), []).append(i)
    return groups


def _wire_dtype(dtype, compression):
    if compression == "fp16" and dtype.is_floating_point and dtype.itemsize > 2:
        return torch.float16
    return dtype


def average(grads, like, compression="none"):
    """The gradients averaged over ranks (new tensors). A None gradient (no
    gradient on this rank: a branch it did not take) travels as zeros shaped
    like its variable in `like`, with a flag per tensor saying which ranks had
    one, so every rank sends the same layout; it comes back None only where no
    rank had one, as in one process. With compression "fp16" floating tensors
    travel and are summed as float16 and come back in their dtype."""
    filled = [torch.zeros_like(v) if g is None else g for g, v in zip(grads, like)]
    out = list(grads)
    pending = []
    for (dtype, device), indices in _groups(filled).items():
        wire = _wire_dtype(dtype, compression)
        had = torch.tensor([grads[i] is not None for i in indices], dtype=wire, device=device)
        flat = torch.cat([filled[i].detach().reshape(-1).to(wire) for i in indices] + [had])
        pending.append((indices, flat, dist.all_reduce(flat, op=dist.ReduceOp.AVG,
                                                        async_op=True)))
    for indices, flat, work in pending:
        work.wait()
        had = flat[flat.numel() - len(indices):].tolist()
        offset = 0
        for i, anyone in zip(indices, had):
            n = filled[i].numel()
            if anyone > 0:
                out[i] = flat[offset:offset + n].view(filled[i].shape).to(filled[i].dtype)
            offset += n
    return out


def broadcast_variables(variables, root=0):
    """Root's values of Keras variables on every rank: their bytes in one
    buffer per device, one broadcast each."""
    if dist.get_world_size() == 1:
        return
    by_device = {}
    for v in variables:
        by_device.setdefault(v.value.device, []).append(v)
    for group in by_device.values():
        values = [v.value.detach().contiguous() for v in group]
        flat = torch.cat([t.reshape(-1).view(torch.uint8) for t in values])
        dist.broadcast(flat, src=root)
        offset = 0
        for v, t in zip(group, values):
            n = t.numel() * t.element_size()
            # A copy: a slice of the byte buffer may not be aligned for t's dtype.
            v.assign(flat[offset:offset + n].clone().view(t.dtype).reshape(t.shape))
            offset += n


class Accumulator:
    """K backward passes per optimizer step: gradients summed locally; add()
    says when the K-th pass came, take() gives the sum divided by K."""

    def __init__(self, k):
        self.k, self.passes, self.sums = int(k), 0, None

    def add(self, grads):
        if self.sums is None:
            self.sums = [None if g is None else g.detach().clone() for g in grads]
        else:
            for i, g in enumerate(grads):
                if g is not None:
                    self.sums[i] = g.detach().clone() if self.sums[i] is None else \
                        self.sums[i].add_(g)
        self.passes += 1
        return self.passes % self.k == 0

    def take(self):
        sums, self.sums = self.sums, None
        return [None if s is None else s / self.k for s in sums]
