"""torch tensors on concord's engine, and Horovod's integer handles.

Every Horovod torch collective is enqueued on the process-wide engine (the one
concord's Python and TensorFlow APIs share) under a name, so ranks may start
them in different orders. The engine works on host memory: a CPU tensor that is
contiguous is handed to it as it is; any other (non-contiguous, or on a GPU) is
staged through a contiguous host copy, and the result copied back when the
handle is synchronized.
"""
from __future__ import annotations

import itertools
import threading
from typing import Callable, Dict, List, Optional

import torch

import concord as _concord_py
from concord import _concord
from concord.horovod import _basics

# The engine's enqueue functions (enqueue_allreduce, ...): the process-wide engine.
engine = _concord

DTYPES = {
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
}


def dtype_name(tensor: torch.Tensor, call: str) -> str:
    """concord's name for a tensor's dtype, for the collectives that reduce."""
    try:
        return DTYPES[tensor.dtype]
    except KeyError:
        names = ", ".join(str(d).replace("torch.", "") for d in DTYPES)
        raise TypeError(f"concord.horovod.torch: {call} of a {tensor.dtype} tensor: the "
                        f"dtypes concord reduces are {names}") from None


def check_tensor(tensor, call: str) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"concord.horovod.torch: {call} takes a torch.Tensor, not "
                        f"{type(tensor).__name__}")
    if tensor.is_sparse:
        raise TypeError(f"concord.horovod.torch: {call} of a sparse tensor: pass "
                        "tensor.to_dense(); DistributedOptimizer exchanges sparse gradients "
                        "itself")
    return tensor


def host_buffer(tensor: torch.Tensor, copy: bool) -> torch.Tensor:
    """A contiguous CPU tensor the engine may read and write: `tensor` itself
    where it is one and no copy was asked for, else a copy. Copying a GPU tensor
    to the host waits for the work queued on its stream, so the engine reads
    what the caller's stream wrote."""
    if not copy and tensor.device.type == "cpu" and tensor.is_contiguous():
        return tensor
    return tensor.detach().to("cpu", copy=True).contiguous()


def as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's bytes as uint8 (for the collectives that only move
    data: any dtype, bool and complex included)."""
    flat = tensor.reshape(-1)
    return flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)


def address(tensor: torch.Tensor) -> int:
    return tensor.data_ptr() if tensor.numel() else 0


def from_bytes(data: bytes, dtype: torch.dtype, shape) -> torch.Tensor:
    """A new CPU tensor of `dtype` and `shape` holding `data`."""
    out = torch.empty(shape, dtype=dtype)
    if out.numel():
        as_bytes(out).numpy()[:] = memoryview(data).cast("B")
    return out


class Pending:
    """One Horovod handle: the engine handles it waits for, the tensors they
    use (kept alive until then) and `finish`, which makes the result."""

    def __init__(self, handles: List, keep: List, finish: Callable[[], object]):
        self.handles = handles
        self.keep = keep
        self.finish = finish


_pending: Dict[int, Pending] = {}
_lock = threading.Lock()
_next_handle = itertools.count(1)
_auto_names: Dict[str, itertools.count] = {}


def op_name(kind: str, name: Optional[str]) -> str:
    """The engine's name for a collective: the caller's name, or the kind's next
    number (which needs the same call order on every rank, as in Horovod)."""
    _basics.require_init()
    if name is not None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"concord.horovod.torch: name must be a non-empty string, "
                             f"not {name!r}")
        return f"hvd.torch/{kind}/{name}"
    counter = _auto_names.setdefault(kind, itertools.count())
    return f"hvd.torch/{kind}/noname.{next(counter)}"


def register(pending: Pending) -> int:
    with _lock:
        handle = next(_next_handle)
        _pending[handle] = pending
    return handle


def _lookup(handle: int) -> Pending:
    with _lock:
        pending = _pending.get(handle)
    if pending is None:
        raise ValueError(f"concord.horovod.torch: handle {handle!r} is not an outstanding "
                         "operation (already synchronized, or not from this process)")
    return pending


def poll(handle: int) -> bool:
    """True once the operation finished: synchronize() then returns at once."""
    return all(h.done() for h in _lookup(handle).handles)


def synchronize(handle: int):
    """Waits for the operation and returns its result; raises
    HorovodInternalError if it failed. A handle is synchronized once."""
    pending = _lookup(handle)
    first_error = _concord_py._wait_all(pending.handles)  # `keep` is in use until then
    with _lock:
        _pending.pop(handle, None)
    if isinstance(first_error, _concord_py.Error):
        raise _basics.internal_error(first_error) from first_error
    if first_error is not None:
        raise first_error
    return pending.finish()


def synchronize_all(handles) -> list:
    """synchronize() of every handle, in order, even when one fails (their
    tensors are in use until then); raises the first error after."""
    results, first_error = [], None
    for h in handles:
        try:
            results.append(synchronize(h))
        except Exception as error:  # noqa: BLE001 (raised below)
            results.append(None)
            first_error = first_error or error
    if first_error is not None:
        raise first_error
    return results


def enqueue(fn, *args):
    """Calls one of the engine's enqueue functions (`engine.enqueue_*`), its
    concord.Error (a bad argument) raised as HorovodInternalError."""
    try:
        return fn(*args)
    except _concord_py.Error as error:
        raise _basics.internal_error(error) from error

