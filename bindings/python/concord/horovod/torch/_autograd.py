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


def _allgather_grads(grads, rows_mine):
    """allgather's backward, as Horovod: each gathered gradient averaged over
    the ranks (as a data-parallel loss's gradients are), then this rank's rows."""
    reduced = grouped_allreduce(list(grads), op=_basics.Average)
    every = _handles.synchronize(_movement.allgather_async(
        torch.tensor([rows_mine], dtype=torch.int64)))
    starts = every[:_basics.rank()].sum(0)
    return [r.narrow(0, int(start), rows) for r, start, rows in zip(reduced, starts, rows_mine)]


def _rows_of(tensor) -> int:
    return tensor.shape[0] if tensor.dim() else 1


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name):
        ctx.rows = [_rows_of(tensor)]
        return _handles.synchronize(_movement.allgather_async(tensor, name))

    @staticmethod
    def backward(ctx, grad):
        return _allgather_grads([grad], ctx.rows)[0], None


def allgather(tensor, name=None, process_set=None) -> torch.Tensor:
    """Every rank's tensor concatenated along the first dimension (which may
    differ between ranks)."""
    _basics.check_process_set(process_set)
    return _Allgather.apply(tensor, name)


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, *tensors):
        ctx.rows = [_rows_of(t) for t in tensors]
        return tuple(_handles.synchronize(_movement.grouped_allgather_async(tensors, name)))

    @staticmethod
    def backward(ctx, *grads):
        return (None, *_allgather_grads(grads, ctx.rows))


def grouped_allgather(tensors, name=None, process_set=None):
    """allgather of each tensor, started together; differentiable."""
    _basics.check_process_set(process_set)
    return list(_GroupedAllgather.apply(name, *tensors))


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


def _reducescatter_grad_scale(op, prescale, postscale) -> float:
    """What reducescatter's backward multiplies the gathered gradients by, as
    Horovod: the scales, and size() for Sum (as allreduce's backward, a Sum of
    every rank's gradient, gives size() times a gradient that every rank has)."""
    summed = _basics.op_name(op) == "sum"
    return prescale * postscale * (_basics.size() if summed else 1)


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale):
        ctx.scale = _reducescatter_grad_scale(op, prescale, postscale)
        return _handles.synchronize(_movement.reducescatter_async(
            tensor, name, op, prescale_factor=prescale, postscale_factor=postscale))

    @staticmethod
    def backward(ctx, grad):
        full = _handles.synchronize(_movement.allgather_async(grad.contiguous()))
        return full * ctx.scale, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=None, process_set=None,
                  prescale_factor=1.0, postscale_factor=1.0) -> torch.Tensor:
    """op (Average by default, or Sum) over ranks, this rank keeping its block
    of the first dimension."""
    _basics.check_process_set(process_set)
    sent, ctx = compression.compress(tensor)
    block = _Reducescatter.apply(sent, name, op, prescale_factor, postscale_factor)
    return compression.decompress(block, ctx)


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, *tensors):
        ctx.scale = _reducescatter_grad_scale(op, prescale, postscale)
        return tuple(_handles.synchronize(_movement.grouped_reducescatter_async(
            tensors, name, op, None, prescale, postscale)))

    @staticmethod
    def backward(ctx, *grads):
        full = _handles.synchronize(_movement.grouped_allgather_async(
            [g.contiguous() for g in grads]))
        return (None, None, None, None, *[f * ctx.scale for f in full])


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=None,
                          process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each tensor, started together; differentiable."""
    _basics.check_process_set(process_set)
    sent, ctxs = zip(*[compression.compress(t) for t in tensors]) if tensors else ((), ())
    blocks = _GroupedReducescatter.apply(name, op, prescale_factor, postscale_factor, *sent)
    return [compression.decompress(b, c) for b, c in zip(blocks, ctxs)]
