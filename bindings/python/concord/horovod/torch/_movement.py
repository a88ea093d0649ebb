"""Horovod's torch allgather, broadcast, alltoall and reducescatter (their
asynchronous and in-place forms) on concord's engine. The ones that only move
data take any dtype: a dtype concord does not reduce travels as its bytes."""
from __future__ import annotations

from typing import List, Tuple

import torch

import concord as _concord_py
from concord.horovod import _basics
from concord.horovod.torch import _handles
from concord.horovod.torch._allreduce import check_scales, deliver
from concord.horovod.torch._handles import engine


def _wire(tensor: torch.Tensor) -> Tuple[torch.Tensor, str, int]:
    """How a host buffer travels: (buffer, concord dtype, elements per element
    of `tensor`). Reducible dtypes keep their name, so the engine checks that
    every rank sends the same; others go as bytes."""
    if tensor.dtype in _handles.DTYPES:
        return tensor.reshape(-1), _handles.DTYPES[tensor.dtype], 1
    return _handles.as_bytes(tensor), "uint8", tensor.element_size()


def _rows(tensor: torch.Tensor, call: str) -> Tuple[tuple, int]:
    """(shape with a first dimension, elements per row): a scalar counts as one row."""
    shape = tuple(tensor.shape) if tensor.dim() else (1,)
    row = 1
    for d in shape[1:]:
        row *= d
    if row == 0:
        raise ValueError(f"concord.horovod.torch: {call} of a tensor of shape {shape}: "
                         "the dimensions after the first must not be empty")
    return shape, row


def _from_rows(h, dtype: torch.dtype, row_shape: tuple, rows: int, device) -> torch.Tensor:
    out = _handles.from_bytes(h.output(), dtype, (rows,) + row_shape)
    return out if device.type == "cpu" else out.to(device)


def allgather_part(tensor, engine_name: str, call: str) -> _handles.Pending:
    _handles.check_tensor(tensor, call)
    shape, row = _rows(tensor, call)
    work = _handles.host_buffer(tensor, copy=False)
    flat, dtype, scale = _wire(work)
    h = _handles.enqueue(engine.enqueue_allgather, engine_name, _handles.address(flat),
                         flat.numel(), dtype, row * scale)
    return _handles.Pending(
        [h], [tensor, work],
        lambda: _from_rows(h, tensor.dtype, shape[1:], sum(h.first_dims()), tensor.device))


def combined(starts) -> _handles.Pending:
    """Several engine collectives under one Horovod handle: a list of results.
    `starts` enqueues them one by one; if one fails to start, the ones already
    started are waited for (they use their tensors until then) before raising."""
    parts: List[_handles.Pending] = []
    try:
        for part in starts:
            parts.append(part)
    except Exception:
        _concord_py._wait_all([h for started in parts for h in started.handles])
        raise
    return _handles.Pending([h for p in parts for h in p.handles],
                            [t for p in parts for t in p.keep],
                            lambda: [p.finish() for p in parts])


def allgather_async(tensor, name=None, process_set=None) -> int:
    """Starts the concatenation of every rank's tensor along the first
    dimension (which may differ between ranks); synchronize() returns it."""
    _basics.check_process_set(process_set)
    return _handles.register(
        allgather_part(tensor, _handles.op_name("allgather", name), "allgather"))


def grouped_allgather_async(tensors, name=None, process_set=None) -> int:
    """allgather of each tensor; synchronize() returns the list of results."""
    _basics.check_process_set(process_set)
    base = _handles.op_name("grouped_allgather", name)
    return _handles.register(combined(allgather_part(t, f"{base}.{i}", "grouped_allgather")
                                      for i, t in enumerate(tensors)))


def _broadcast(tensor, root_rank, name, in_place: bool, call: str) -> int:
    _handles.check_tensor(tensor, call)
    root = _basics.check_root(root_rank)
    work = _handles.host_buffer(tensor, copy=not in_place)
    flat, dtype, _ = _wire(work)
    h = _handles.enqueue(engine.enqueue_broadcast, _handles.op_name("broadcast", name),
                         _handles.address(flat), flat.numel(), dtype, root)
    return _handles.register(_handles.Pending(
        [h], [tensor, work], lambda: deliver(tensor, work, in_place)))


def broadcast_async(tensor, root_rank, name=None, process_set=None) -> int:
    """Starts the broadcast of root_rank's tensor; synchronize() returns a new
    tensor (the input is not modified)."""
    _basics.check_process_set(process_set)
    return _broadcast(tensor, root_rank, name, False, "broadcast")


def broadcast_async_(tensor, root_rank, name=None, process_set=None) -> int:
    """broadcast_async, root_rank's values written into `tensor`."""
    _basics.check_process_set(process_set)
    return _broadcast(tensor, root_rank, name, True, "broadcast_")


def broadcast_(tensor, root_rank, name=None, process_set=None) -> torch.Tensor:
    return _handles.synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def _send_rows(splits, rows: int) -> List[int]:
    if splits is None:
        return []
    values = splits.tolist() if isinstance(splits, torch.Tensor) else list(splits)
    size = _concord_py.size()
    if len(values) != size or any(int(v) < 0 for v in values) or sum(values) != rows:
        raise ValueError(f"concord.horovod.torch: alltoall splits {values} must be {size} "
                         f"non-negative row counts that add up to the tensor's {rows} rows")
    return [int(v) for v in values]


def alltoall_async(tensor, splits=None, name=None, process_set=None) -> int:
    """Starts an alltoall: splits[i] rows of tensor go to rank i (equal parts
    when splits is None). synchronize() returns (received rows, in source-rank
    order; a tensor of how many came from each rank)."""
    _basics.check_process_set(process_set)
    _handles.check_tensor(tensor, "alltoall")
    shape, row = _rows(tensor, "alltoall")
    send_rows = _send_rows(splits, shape[0])
    work = _handles.host_buffer(tensor, copy=False)
    flat, dtype, scale = _wire(work)
    h = _handles.enqueue(engine.enqueue_alltoall, _handles.op_name("alltoall", name),
                         _handles.address(flat), flat.numel(), dtype, row * scale, send_rows)

    def finish():
        received = h.first_dims()
        out = _from_rows(h, tensor.dtype, shape[1:], sum(received), tensor.device)
        return out, torch.tensor(received, dtype=torch.int32)

    return _handles.register(_handles.Pending([h], [tensor, work], finish))


def _reducescatter(tensor, engine_name: str, op, prescale_factor, postscale_factor,
                   call: str) -> _handles.Pending:
    _handles.check_tensor(tensor, call)
    op_name = _basics.op_name(op)
    if op_name not in ("sum", "avg"):
        raise ValueError(f"concord.horovod.torch: {call} supports hvd.Average and hvd.Sum")
    dtype = _handles.dtype_name(tensor, call)
    check_scales(tensor, op_name, prescale_factor, postscale_factor, call)
    shape, row = _rows(tensor, call)
    work = _handles.host_buffer(tensor, copy=False)
    h = _handles.enqueue(engine.enqueue_reducescatter, engine_name, _handles.address(work),
                         work.numel(), dtype, row, op_name, prescale_factor, postscale_factor)
    mine = _concord_py.rank()
    return _handles.Pending(
        [h], [tensor, work],
        lambda: _from_rows(h, tensor.dtype, shape[1:], h.first_dims()[mine], tensor.device))


def reducescatter_async(tensor, name=None, op=None, process_set=None, prescale_factor=1.0,
                        postscale_factor=1.0) -> int:
    """Starts op (Average by default, or Sum) over ranks of tensor, this rank
    keeping its block of the first dimension (the first rows % size() ranks
    one row more); synchronize() returns the block."""
    _basics.check_process_set(process_set)
    return _handles.register(_reducescatter(tensor, _handles.op_name("reducescatter", name), op,
                                            prescale_factor, postscale_factor, "reducescatter"))


def grouped_reducescatter_async(tensors, name=None, op=None, process_set=None,
                                prescale_factor=1.0, postscale_factor=1.0) -> int:
    """reducescatter of each tensor; synchronize() returns the list of blocks."""
    _basics.check_process_set(process_set)
    base = _handles.op_name("grouped_reducescatter", name)
    return _handles.register(combined(
        _reducescatter(t, f"{base}.{i}", op, prescale_factor, postscale_factor,
                       "grouped_reducescatter") for i, t in enumerate(tensors)))
