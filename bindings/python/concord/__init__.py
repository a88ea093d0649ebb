"""concord: collective communication for distributed deep learning.

Run under ``mpiexec.mpich -n N python script.py`` (or ``concordrun -np N``);
imported without a launcher, the process is a single rank.

Arrays are any C-contiguous buffer (numpy arrays, or objects numpy can view
without copying); bfloat16 comes from ``ml_dtypes``. Calls that communicate
release the GIL.
"""
from __future__ import annotations

import atexit
import collections
import itertools
import math
import operator
import sys
from typing import Iterable, List, Optional, Sequence

import numpy as np

from ._errors import Error
from . import _concord

__all__ = [
    "Error", "Handle", "init", "rank", "size", "local_rank", "local_size", "barrier",
    "allreduce", "allreduce_async", "grouped_allreduce", "broadcast", "allgather", "shutdown",
    "empty_shared", "is_shared", "build_commit",
]

try:  # bfloat16 is not a numpy type; ml_dtypes provides it
    import ml_dtypes as _ml_dtypes
    _BFLOAT16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    _BFLOAT16 = None

_DTYPES = {
    np.dtype(np.int8): "int8",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
    np.dtype(np.float16): "float16",
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
}
if _BFLOAT16 is not None:
    _DTYPES[_BFLOAT16] = "bfloat16"

_OPS = ("sum", "avg", "min", "max", "prod")
_names = itertools.count()


def _dtype_name(array: np.ndarray) -> str:
    try:
        return _DTYPES[array.dtype]
    except KeyError:
        raise TypeError(
            f"concord: dtype {array.dtype} is not supported; use one of "
            + ", ".join(sorted(_DTYPES.values()))) from None


def _as_input(array) -> np.ndarray:
    """A view of `array` (no copy) that must be C-contiguous."""
    a = np.asarray(array)
    if not a.flags.c_contiguous:
        raise ValueError("concord: the array must be C-contiguous "
                         "(np.ascontiguousarray makes a contiguous copy)")
    _dtype_name(a)
    return a


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0] if a.size else 0


def _check_op(op: str) -> str:
    if op not in _OPS:
        raise ValueError(f"concord: op must be one of {', '.join(_OPS)}, not {op!r}")
    return op


def _check_output(out: np.ndarray, like: np.ndarray) -> np.ndarray:
    if not isinstance(out, np.ndarray):
        raise TypeError("concord: out must be a numpy array")
    if out.dtype != like.dtype or out.shape != like.shape:
        raise ValueError(f"concord: out has dtype {out.dtype} and shape {out.shape}; "
                         f"expected {like.dtype} and {like.shape}")
    if not out.flags.c_contiguous:
        raise ValueError("concord: out must be C-contiguous")
    if not out.flags.writeable:
        raise ValueError("concord: out is read-only")
    return out


def init() -> None:
    """Initialises MPI (if nobody has) and concord. Called implicitly by every
    other function; calling it first makes start-up errors appear early."""
    _concord.init()


def rank() -> int:
    return _concord.rank()


def size() -> int:
    return _concord.size()


def local_rank() -> int:
    """This rank's index among the ranks on its node."""
    return _concord.local_rank()


def local_size() -> int:
    return _concord.local_size()


def barrier() -> None:
    _concord.barrier()


def empty_shared(shape, dtype=np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array in this rank's part of the node's
    shared heap (concord::allocate_shared). allreduce on such arrays, as input
    and output (`out=`), lets the node's ranks use them where they lie instead
    of copying them: docs/API.md, "Shared buffers". Call it on every rank (the
    first call may set up the node's shared memory). Where the node has no heap
    (one rank on it, CONCORD_SHM=0) the array is ordinary memory; is_shared()
    says which. The memory lives as long as the array and every view of it."""
    dt = np.dtype(dtype)
    _dtype_name(np.empty(0, dt))
    dims = tuple(shape) if isinstance(shape, (tuple, list, np.ndarray)) else (shape,)
    shape = tuple(operator.index(d) for d in dims)  # TypeError for 3.7, as numpy
    if any(d < 0 for d in shape):
        raise ValueError(f"concord: negative dimension in shape {shape}")
    count = math.prod(shape)
    if count * dt.itemsize > sys.maxsize:
        raise ValueError(f"concord: empty_shared{shape} of {dt} is {count * dt.itemsize} bytes, "
                         "more than a process can address")
    memory = _concord.allocate_shared(count * dt.itemsize)
    if count == 0:
        return np.empty(shape, dt)
    return np.frombuffer(memory, dtype=dt, count=count).reshape(shape)


def is_shared(array) -> bool:
    """Whether `array`'s memory is in the node's shared heap (an array from
    empty_shared, or a view of one, where the node has a heap)."""
    base = array
    while base is not None:
        if isinstance(base, _concord.SharedMemory):
            return base.shared
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return False


def allreduce(array, op: str = "sum", algorithm: Optional[str] = None,
              out: Optional[np.ndarray] = None) -> np.ndarray:
    """Reduces `array` over all ranks and returns the result: a new array of the
    same dtype and shape, or `out` (which may be `array` itself: in place).

    op: "sum", "avg", "min", "max" or "prod" ("avg" needs a floating dtype).
    algorithm: None (auto), "ring", "recursive_doubling",
    "reduce_scatter_allgather" or "hierarchical".
    """
    a = _as_input(array)
    result = np.empty_like(a) if out is None else _check_output(out, a)
    _concord.allreduce(_address(a), _address(result), a.size, _dtype_name(a), _check_op(op),
                       algorithm)
    return result


# Operations whose Handle was dropped before they completed, with their arrays:
# the engine reads and writes those arrays until the operation completes, so
# they are kept here until then, and let go by the next call that starts or
# waits for an operation (or by shutdown()). Handle.__del__ may run anywhere,
# _release_orphans included (in a collection it sets off), so it only appends,
# which a deque does atomically, without a lock it could already hold; and
# _release_orphans takes each entry out once and puts back what is in flight,
# so that an entry appended meanwhile is never lost.
_orphans: collections.deque = collections.deque()


def _release_orphans() -> None:
    for _ in range(len(_orphans)):
        try:
            entry = _orphans.popleft()
        except IndexError:  # another thread took the rest
            return
        if not entry[0].done():
            _orphans.append(entry)


class Handle:
    """An asynchronous operation; keeps its arrays alive until it completes,
    also when the Handle itself is dropped first."""

    def __init__(self, handle, arrays, finish=None):
        self._handle = handle
        self._arrays = arrays
        self._finish = finish
        self._result = None
        self._complete = False

    def wait(self):
        """Blocks until done (raises concord.Error if it failed); returns the result."""
        if not self._complete:
            self._handle.wait()
            self._result = self._finish() if self._finish else self._arrays[-1]
            self._complete = True
            self._arrays = None
            _release_orphans()
        return self._result

    def done(self) -> bool:
        """True once the operation completed (wait() then returns at once)."""
        return self._complete or self._handle.done()

    def __del__(self):
        # Dropped before it completed: the engine still uses the arrays.
        arrays = getattr(self, "_arrays", None)
        if arrays is not None and not self._handle.done():
            _orphans.append((self._handle, arrays))


def allreduce_async(array, op: str = "sum", name: Optional[str] = None,
                    out: Optional[np.ndarray] = None, prescale: float = 1.0,
                    postscale: float = 1.0) -> Handle:
    """Starts an allreduce through the fusion engine; wait() returns the result.

    Ranks may start their operations in different orders: they are matched by
    `name` (default: a counter, which needs the same call order on every rank).
    """
    _release_orphans()
    a = _as_input(array)
    result = _check_output(out, a) if out is not None else a.copy()
    if out is not None and result is not a:
        np.copyto(result, a)
    name = name if name is not None else f"concord.allreduce.{next(_names)}"
    h = _concord.enqueue_allreduce(name, _address(result), result.size, _dtype_name(result),
                                   _check_op(op), prescale, postscale)
    return Handle(h, [a, result])


def grouped_allreduce(arrays: Sequence, op: str = "sum",
                      names: Optional[Sequence[str]] = None) -> List[np.ndarray]:
    """Allreduces several arrays as one group (fused); returns new arrays."""
    inputs = [_as_input(a) for a in arrays]
    results = [a.copy() for a in inputs]
    if names is None:
        base = next(_names)
        names = [f"concord.group.{base}.{i}" for i in range(len(results))]
    if len(names) != len(results):
        raise ValueError("concord: names and arrays differ in length")
    handles = _concord.enqueue_grouped_allreduce(
        list(names), [_address(r) for r in results], [r.size for r in results],
        [_dtype_name(r) for r in results], _check_op(op))
    # The engine writes into `results` until each handle completes.
    first_error = _wait_all(handles)
    if first_error is not None:
        raise first_error
    return results


def _wait_all(handles) -> Optional[BaseException]:
    """Waits for every engine handle, even after one failed (the engine uses
    a handle's buffers until it completes, so none may be freed before), and
    returns the first error, or None."""
    first_error = None
    for h in handles:
        try:
            h.wait()
        except Exception as e:  # noqa: BLE001 (returned: the caller raises it)
            first_error = first_error or e
    return first_error


def broadcast(array, root: int = 0, name: Optional[str] = None) -> np.ndarray:
    """Returns root's `array` on every rank (a new array)."""
    a = _as_input(array)
    result = a.copy()
    name = name if name is not None else f"concord.broadcast.{next(_names)}"
    _concord.enqueue_broadcast(name, _address(result), result.size, _dtype_name(result),
                               int(root)).wait()
    return result


def allgather(array, name: Optional[str] = None) -> np.ndarray:
    """Concatenates every rank's `array` along the first axis (whose length may
    differ between ranks); the other dimensions must agree."""
    a = _as_input(array)
    if a.ndim == 0:
        a = a.reshape(1)
    row = int(np.prod(a.shape[1:], dtype=np.int64)) if a.ndim > 1 else 1
    name = name if name is not None else f"concord.allgather.{next(_names)}"
    if row == 0:
        raise ValueError("concord: allgather of arrays with an empty trailing dimension")
    h = _concord.enqueue_allgather(name, _address(a), a.size, _dtype_name(a), row)
    data = h.output()
    rows = sum(h.first_dims())
    return np.frombuffer(data, dtype=a.dtype).reshape((rows,) + a.shape[1:]).copy()


def build_commit() -> str:
    """The commit this package was built from (`git describe --tags --always
    --dirty` of the source tree at build time; "unknown" outside a git
    checkout): what a benchmark of the installed package measured."""
    return _concord.build_commit


def shutdown() -> None:
    """Stops the background engine (also done at interpreter exit)."""
    _concord.shutdown()
    _orphans.clear()  # the engine failed what was pending and uses no array after


atexit.register(shutdown)
