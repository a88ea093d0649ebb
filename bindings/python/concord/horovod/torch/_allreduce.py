"""Horovod's torch allreduce family (one tensor or a group; new result or in
place; asynchronous or not), join and barrier, on concord's engine."""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch

import concord as _concord_py
from concord.horovod import _basics
from concord.horovod.torch import _handles
from concord.horovod.torch._handles import engine


def check_scales(tensor: torch.Tensor, op: str, prescale: float, postscale: float,
                 call: str) -> None:
    """concord's engine scales and averages floating tensors only; say so for
    the others instead of truncating silently."""
    if tensor.is_floating_point():
        return
    if op == "avg":
        raise TypeError(f"concord.horovod.torch: {call} with op=hvd.Average of a {tensor.dtype} "
                        "tensor: use op=hvd.Sum (and divide as you need)")
    if prescale != 1.0 or postscale != 1.0:
        raise ValueError(f"concord.horovod.torch: {call}: prescale_factor and postscale_factor "
                         f"must be 1 for a {tensor.dtype} tensor")


def deliver(source: torch.Tensor, work: torch.Tensor, in_place: bool) -> torch.Tensor:
    """The result of a collective that ran on `work` (source's host buffer):
    written back into `source` (in place), or returned on source's device."""
    if in_place:
        if work is not source:
            with torch.no_grad():
                source.copy_(work)
        return source
    return work if source.device.type == "cpu" else work.to(source.device)


def launch(tensors: Sequence[torch.Tensor], names: List[str], op: str, prescale: float,
           postscale: float, in_place: bool, call: str, single: bool) -> int:
    """Enqueues the allreduce of `tensors` (one atomic group when several) and
    returns its Horovod handle; synchronize() gives the result(s). Integer
    tensors are averaged as Horovod does: summed, then floor-divided by size()."""
    dtypes = [_handles.dtype_name(_handles.check_tensor(t, call), call) for t in tensors]
    floor_average = op == "avg" and not any(t.is_floating_point() for t in tensors)
    if floor_average:
        op = "sum"
    for t in tensors:
        check_scales(t, op, prescale, postscale, call)
    works = [_handles.host_buffer(t, copy=not in_place) for t in tensors]
    if single:
        w = works[0]
        handles = [_handles.enqueue(engine.enqueue_allreduce, names[0], _handles.address(w),
                                    w.numel(), dtypes[0], op, prescale, postscale)]
    else:
        handles = _handles.enqueue(
            engine.enqueue_grouped_allreduce, names, [_handles.address(w) for w in works],
            [w.numel() for w in works], dtypes, op, prescale, postscale)

    def finish():
        if floor_average:
            for w in works:
                torch.floor_divide(w, _concord_py.size(), out=w)
        results = [deliver(t, w, in_place) for t, w in zip(tensors, works)]
        return results[0] if single else results

    return _handles.register(_handles.Pending(handles, list(tensors) + works, finish))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None) -> int:
    """Starts op (default Average) over every rank of tensor; the tensor is not
    modified. Returns a handle for poll() and synchronize()."""
    _basics.check_process_set(process_set)
    return launch([tensor], [_handles.op_name("allreduce", name)], _basics.op_name(op, average),
                  prescale_factor, postscale_factor, False, "allreduce", True)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None) -> int:
    """allreduce_async, the result written into `tensor`."""
    _basics.check_process_set(process_set)
    return launch([tensor], [_handles.op_name("allreduce", name)], _basics.op_name(op, average),
                  prescale_factor, postscale_factor, True, "allreduce_", True)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None) -> torch.Tensor:
    return _handles.synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                                 postscale_factor, process_set))


def _group_names(name: Optional[str], count: int) -> List[str]:
    base = _handles.op_name("grouped_allreduce", name)
    return [f"{base}.{i}" for i in range(count)]


def _check_group(tensors, call: str) -> list:
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"concord.horovod.torch: {call} of an empty list of tensors")
    return tensors


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None) -> int:
    """Starts the allreduce of several tensors as one group (fused by the
    engine); synchronize() returns a list of new tensors."""
    _basics.check_process_set(process_set)
    tensors = _check_group(tensors, "grouped_allreduce")
    return launch(tensors, _group_names(name, len(tensors)), _basics.op_name(op, average),
                  prescale_factor, postscale_factor, False, "grouped_allreduce", False)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None) -> int:
    _basics.check_process_set(process_set)
    tensors = _check_group(tensors, "grouped_allreduce_")
    return launch(tensors, _group_names(name, len(tensors)), _basics.op_name(op, average),
                  prescale_factor, postscale_factor, True, "grouped_allreduce_", False)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None) -> List[torch.Tensor]:
    return _handles.synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor, process_set))


def join(device=-1) -> int:
    """This rank is out of data: until every rank has joined, it adds zeros to
    the others' allreduces (Average still divides by size()). Returns the last
    rank to join. `device` is accepted for Horovod's signature; the engine's
    join does not depend on it."""
    _basics.require_init()
    h = _handles.enqueue(engine.enqueue_join)
    pending = _handles.register(_handles.Pending([h], [], lambda: h.output()))
    data = _handles.synchronize(pending)
    return int(torch.frombuffer(bytearray(data), dtype=torch.int32)[0])


def barrier(process_set=None) -> None:
    """Returns once every rank has called it."""
    _basics.check_process_set(process_set)
    _basics.require_init()
    _concord_py.barrier()
