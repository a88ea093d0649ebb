"""Horovod's process-level API (init, rank, size, ...) and its reduction
constants, on concord. Shared by the tensorflow and keras modules."""
from __future__ import annotations

import numpy as np

import concord as _concord_py
from concord.horovod import _unsupported

# Horovod's ReduceOp values, so code that compares or stores them keeps working.
Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
_OP_NAMES = {Average: "avg", Sum: "sum", Min: "min", Max: "max", Product: "prod"}


class ProcessSet:
    """Only the global process set exists (every rank); building another raises."""

    def __init__(self, ranks=None, *, _global=False):
        if not _global:
            _unsupported.fail("ProcessSet (process sets)", _unsupported.PROCESS_SET_HINT)
        self.process_set_id = 0
        self.ranks = None

    def size(self):
        return size()

    def rank(self):
        return rank()

    def included(self):
        return True

    def __repr__(self):
        return "ProcessSet(global)"


global_process_set = ProcessSet(_global=True)


def check_process_set(process_set) -> None:
    """A process_set argument: the global one, or a clear error."""
    if process_set is not None and process_set is not global_process_set:
        _unsupported.fail("process_set= other than hvd.global_process_set",
                          _unsupported.PROCESS_SET_HINT)


def add_process_set(*args, **kwargs):
    _unsupported.fail("add_process_set (process sets)", _unsupported.PROCESS_SET_HINT)


def remove_process_set(*args, **kwargs):
    _unsupported.fail("remove_process_set (process sets)", _unsupported.PROCESS_SET_HINT)


def op_name(op, average=None) -> str:
    """concord's name for a Horovod op, with Horovod's rule for the deprecated
    `average` flag (True → Average, False → Sum; not both)."""
    if average is not None:
        if op is not None:
            raise ValueError("concord.horovod: give op= or the deprecated average=, not both")
        op = Average if average else Sum
    if op is None:
        op = Average
    if op == Adasum:
        _unsupported.fail("Adasum (op=hvd.Adasum)", _unsupported.ADASUM_HINT)
    if op not in _OP_NAMES:
        raise ValueError(f"concord.horovod: unknown reduction op {op!r}: use hvd.Average, "
                         "hvd.Sum, hvd.Min, hvd.Max or hvd.Product")
    return _OP_NAMES[op]


class HorovodInternalError(_concord_py.Error):
    """A collective failed (a peer gone, a stall timeout, mismatched tensors):
    Horovod's name for it, still a concord.Error with its code."""


def internal_error(error: _concord_py.Error) -> HorovodInternalError:
    return HorovodInternalError(error.code, error.code_value, error.message)


_state = {"initialized": False, "shut_down": False, "cross": None}


def init(comm=None, process_sets=None) -> None:
    """Starts MPI and concord's engine on every rank (collective)."""
    if comm is not None and not _is_comm_world(comm):
        _unsupported.fail("init(comm=...) with a communicator other than MPI.COMM_WORLD",
                          _unsupported.PROCESS_SET_HINT)
    if process_sets:
        _unsupported.fail("init(process_sets=...)", _unsupported.PROCESS_SET_HINT)
    if _state["shut_down"]:
        raise RuntimeError("concord.horovod: init() after shutdown(): concord's engine cannot "
                           "be restarted in the same process")
    if _state["initialized"]:
        return
    # The process-wide engine, shared by concord's Python, TensorFlow and torch
    # APIs: a script's collectives meet in one negotiation, whatever framework
    # made them.
    _concord_py._concord.init()
    _concord_py._concord.start_engine()
    # Horovod's cross communicator joins the ranks with the same local rank:
    # cross_rank is this rank's index among them.
    local_ranks = _concord_py.allgather(np.array([local_rank_unchecked()], np.int64),
                                        name="concord.horovod/init/local_ranks")
    mine = local_ranks[rank_unchecked()]
    same = np.flatnonzero(local_ranks == mine)
    _state["cross"] = (int(np.searchsorted(same, rank_unchecked())), int(len(same)))
    _state["initialized"] = True


def _is_comm_world(comm) -> bool:
    if isinstance(comm, (list, tuple)):
        return sorted(comm) == list(range(_concord_py.size()))
    try:
        from mpi4py import MPI
        return MPI.Comm.Compare(comm, MPI.COMM_WORLD) in (MPI.IDENT, MPI.CONGRUENT)
    except ImportError:
        return False


def shutdown() -> None:
    """Stops concord's engine; no collective can run after it."""
    if _state["initialized"]:
        _concord_py.shutdown()
        _state["initialized"] = False
        _state["shut_down"] = True


def is_initialized() -> bool:
    return _state["initialized"]


def require_init():
    if not _state["initialized"]:
        raise ValueError("concord.horovod has not been initialized; use hvd.init().")


_check = require_init


def check_root(root_rank) -> int:
    """root_rank as an int, or a ValueError naming it where it is not a rank."""
    require_init()
    root = int(root_rank)
    if not 0 <= root < _concord_py.size():
        raise ValueError(f"concord.horovod: root_rank {root_rank} is not a rank of this job "
                         f"(0..{_concord_py.size() - 1})")
    return root


def rank_unchecked() -> int:
    return _concord_py.rank()


def local_rank_unchecked() -> int:
    return _concord_py.local_rank()


def rank() -> int:
    _check()
    return _concord_py.rank()


def size() -> int:
    _check()
    return _concord_py.size()


def local_rank() -> int:
    _check()
    return _concord_py.local_rank()


def local_size() -> int:
    _check()
    return _concord_py.local_size()


def cross_rank() -> int:
    _check()
    return _state["cross"][0]


def cross_size() -> int:
    _check()
    return _state["cross"][1]


def is_homogeneous() -> bool:
    """Whether every node runs the same number of ranks."""
    _check()
    return size() == local_size() * cross_size()


def mpi_threads_supported() -> bool:
    # concord's engine talks MPI from its own thread: it initialises MPI with
    # MPI_THREAD_MULTIPLE and refuses to run without it.
    _check()
    return True


def mpi_enabled() -> bool:
    return True


def mpi_built() -> bool:
    return True


def gloo_enabled() -> bool:
    return False


def gloo_built() -> bool:
    return False


def nccl_built() -> bool:
    from concord import _mpi_build
    return bool(getattr(_mpi_build, "WITH_NCCL", False))


def cuda_built() -> bool:
    from concord import _mpi_build
    return bool(getattr(_mpi_build, "WITH_CUDA", False))


def rocm_built() -> bool:
    return False


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def start_timeline(file_path, mark_cycles=False):
    _unsupported.fail("start_timeline/stop_timeline (a timeline started at run time)",
                      "set CONCORD_TIMELINE=/path/trace.json before the job starts: the engine "
                      "writes a Chrome trace of every collective (docs/ENVIRONMENT.md)")


def stop_timeline():
    start_timeline(None)
