"""Horovod's TensorFlow API on concord (TensorFlow 2.21, Keras 3):

    import concord.horovod.tensorflow as hvd     # was: import horovod.tensorflow as hvd

Importing it tells concordrun's transparent mode that the script distributes
itself: the launcher's patches are undone (no double averaging or sharding).
docs/HOROVOD.md lists every Horovod name and how concord provides it.
"""
from __future__ import annotations

import sys as _sys

from concord import tensorflow as _ctf
from concord.horovod import _unsupported
from concord.horovod._basics import (  # noqa: F401
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, add_process_set, ccl_built,
    cross_rank, cross_size, cuda_built, ddl_built, global_process_set, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
    mpi_enabled, mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built,
    shutdown, size, start_timeline, stop_timeline)
from concord.horovod.tensorflow._collectives import (  # noqa: F401
    allgather, allgather_object, allreduce, alltoall, barrier, broadcast, broadcast_,
    broadcast_object, broadcast_variables, grouped_allgather, grouped_allreduce,
    grouped_reducescatter, join, reducescatter)
from concord.horovod.tensorflow._gradients import (  # noqa: F401
    DistributedGradientTape, DistributedOptimizer)
from concord.horovod.tensorflow.compression import Compression  # noqa: F401


class ReduceOp:
    """The reduction ops under one name, as horovod.common.basics has them."""
    AVERAGE, SUM, ADASUM, MIN, MAX, PRODUCT = Average, Sum, Adasum, Min, Max, Product


def broadcast_global_variables(root_rank):
    raise RuntimeError(
        "concord.horovod: broadcast_global_variables() is TensorFlow 1 (graph collections) and "
        "does not support eager execution; use hvd.broadcast_variables(model.variables, "
        "root_rank) and hvd.broadcast_variables(optimizer.variables, root_rank)")


BroadcastGlobalVariablesHook = _unsupported.function(
    "BroadcastGlobalVariablesHook (a TensorFlow 1 SessionRunHook)",
    "use hvd.broadcast_variables after the first step, or the Keras callback")
PartialDistributedGradientTape = _unsupported.function(
    "PartialDistributedGradientTape", "use DistributedGradientTape (every gradient averaged)")
PartialDistributedOptimizer = _unsupported.function(
    "PartialDistributedOptimizer", "use DistributedOptimizer (every gradient averaged)")
SyncBatchNormalization = _unsupported.function(
    "SyncBatchNormalization", "use keras.layers.BatchNormalization (per-rank statistics)")
broadcast_object_fn = _unsupported.function(
    "broadcast_object_fn (TensorFlow 1 sessions)", "use hvd.broadcast_object")
run_elastic = _unsupported.function("run_elastic (elastic training)", _unsupported.ELASTIC_HINT)
for _op in ("size_op", "local_size_op", "rank_op", "local_rank_op", "process_set_included_op"):
    globals()[_op] = _unsupported.function(
        f"{_op} (graph ops for the job's shape)", "call hvd.size()/hvd.rank() (Python values)")

elastic = _unsupported.elastic_module(__name__ + ".elastic")
_sys.modules[__name__ + ".elastic"] = elastic

_ctf._explicit_api("import concord.horovod")
