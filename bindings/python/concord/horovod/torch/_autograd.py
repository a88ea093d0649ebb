"""Horovod's synchronous torch collectives: each returns a new tensor and, as
in Horovod, is differentiable (its backward is the matching collective on the
gradient)."""
from __future__ import annotations

import torch

from concord.horovod import _basics
from concord.horovod.torch import _allreduce, _handles, _movement
from concord.horovod.torch.compression import Compression


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale, postscale):
        ctx.args = (average, op, prescale, postscale)
        return _handles.synchronize(_allreduce.allreduce_async(
            tensor, average, name, op, prescale, postscale))

    @staticmethod
    def backward(ctx, grad):
        average, op, prescale, postscale = ctx.args
        return (allreduce(grad, average=average, op=op, prescale_factor=prescale,
                          postscale_factor=postscale), None, None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=None) -> torch.Tensor:
    """op (default Average) over every rank of prescale_factor * tensor, times
    postscale_factor; the tensor is not modified."""
    _basics.check_process_set(process_set)
    sent, ctx = compression.compress(tensor)
    reduced = _Allreduce.apply(sent, average, name, op, prescale_factor, postscale_factor)
    return compression.decompress(reduced, ctx)


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, average, name, op, prescale, postscale, *tensors):
        ctx.args = (average, op, prescale, postscale)
        return tuple(_handles.synchronize(_allreduce.grouped_allreduce_async(
            tensors, average, name, op, prescale, postscale)))

    @staticmethod
    def backward(ctx, *grads):
        average, op, prescale, postscale = ctx.args
        reduced = grouped_allreduce(list(grads), average=average, op=op,
                                    prescale_factor=prescale, postscale_factor=postscale)
        return (None, None, None, None, None, *reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """allreduce of a list of tensors as one group (fused by the engine)."""
    _basics.check_process_set(process_set)
    sent, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    reduced = _GroupedAllreduce.apply(average, name, op, prescale_factor, postscale_factor,
                                      *sent)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = tensor.shape[0] if tensor.dim() else 1
        return _handles.synchronize(_movement.allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad):
        # Averaged, as Horovod does: the gradients of a data-parallel loss are.
        reduced = allreduce(grad, op=_basics.Average)
        rows = _handles.synchronize(_movement.allgather_async(
            torch.tensor([ctx.rows], dtype=torch.int64)))
        start = int(rows[:_basics.rank()].sum())
        return reduced.narrow(0, start, ctx.rows), None


def allgather(tensor, name=None, process_set=None) -> torch.Tensor:
    """Every rank's tensor concatenated along the first dimension (which may
    differ between ranks)."""
    _basics.check_process_set(process_set)
    return _Allgather.apply(tensor, name)


def grouped_allgather(tensors, name=None, process_set=None):
    return _handles.synchronize(_movement.grouped_allgather_async(tensors, name, process_set))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root = root_rank
        return _handles.synchronize(_movement.broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=_basics.Average)
        if _basics.rank() != ctx.root:
            reduced = torch.zeros_like(reduced)
        return reduced, None, None


def broadcast(tensor, root_rank, name=None, process_set=None) -> torch.Tensor:
    """root_rank's tensor on every rank, as a new tensor."""
    _basics.check_process_set(process_set)
    return _Broadcast.apply(tensor, root_rank, name)


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name):
        out, received = _handles.synchronize(_movement.alltoall_async(tensor, splits, name))
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _received_grad):
        back, _ = _handles.synchronize(_movement.alltoall_async(grad, ctx.received))
        return back, None, None


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Rows of tensor to every rank (splits[i] to rank i; equal parts when
    splits is None). Returns the rows received, and with splits given also how
    many came from each rank, as Horovod does."""
    _basics.check_process_set(process_set)
    out, received = _Alltoall.apply(tensor, splits, name)
    return out if splits is None else (out, received)


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale):
        ctx.average = _basics.op_name(op) == "avg"
        ctx.scale = prescale * postscale
        return _handles.synchronize(_movement.reducescatter_async(
            tensor, name, op, prescale_factor=prescale, postscale_factor=postscale))

    @staticmethod
    def backward(ctx, grad):
        full = _handles.synchronize(_movement.allgather_async(grad.contiguous()))
        scale = ctx.scale / (_basics.size() if ctx.average else 1)
        return full * scale, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=None, process_set=None,
                  prescale_factor=1.0, postscale_factor=1.0) -> torch.Tensor:
    """op (Average by default, or Sum) over ranks, this rank keeping its block
    of the first dimension."""
    _basics.check_process_set(process_set)
    sent, ctx = compression.compress(tensor)
    block = _Reducescatter.apply(sent, name, op, prescale_factor, postscale_factor)
    return compression.decompress(block, ctx)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=None,
                          process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    sent, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    blocks = _handles.synchronize(_movement.grouped_reducescatter_async(
        sent, name, op, process_set, prescale_factor, postscale_factor))
    return [compression.decompress(b, c) for b, c in zip(blocks, ctxs)]
