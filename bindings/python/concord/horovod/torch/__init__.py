"""Horovod's PyTorch API on concord:

    import concord.horovod.torch as hvd          # was: import horovod.torch as hvd

Run with ``concordrun --no-tensorflow -np N python train.py`` or ``mpiexec -n N
python train.py``. Collectives are matched between ranks by name on concord's
engine, fused as in Horovod; tensors on a GPU are staged through host memory.
docs/HOROVOD.md lists every Horovod name and how concord provides it.
"""
from __future__ import annotations

import sys as _sys

from concord.horovod import _unsupported
from concord.transparent import explicit as _explicit
from concord.horovod._basics import (  # noqa: F401
    Adasum, Average, HorovodInternalError, Max, Min, Product, ProcessSet, Sum, add_process_set,
    ccl_built, cross_rank, cross_size, cuda_built, ddl_built, global_process_set, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
    mpi_enabled, mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built,
    shutdown, size, start_timeline, stop_timeline)
from concord.horovod._objects import allgather_object, broadcast_object  # noqa: F401
from concord.horovod.torch._allreduce import (  # noqa: F401
    allreduce_, allreduce_async, allreduce_async_, barrier, grouped_allreduce_,
    grouped_allreduce_async, grouped_allreduce_async_, join)
from concord.horovod.torch._autograd import (  # noqa: F401
    allgather, allreduce, alltoall, broadcast, grouped_allgather, grouped_allreduce,
    grouped_reducescatter, reducescatter)
from concord.horovod.torch._functions import (  # noqa: F401
    broadcast_optimizer_state, broadcast_parameters)
from concord.horovod.torch._handles import poll, synchronize  # noqa: F401
from concord.horovod.torch._movement import (  # noqa: F401
    allgather_async, alltoall_async, broadcast_, broadcast_async, broadcast_async_,
    grouped_allgather_async, grouped_reducescatter_async, reducescatter_async)
from concord.horovod.torch._optimizer import DistributedOptimizer  # noqa: F401
from concord.horovod.torch.compression import (  # noqa: F401
    Compression, Compressor, FP16Compressor, NoneCompressor)


class ReduceOp:
    """The reduction ops under one name, as horovod.common.basics has them."""
    AVERAGE, SUM, ADASUM, MIN, MAX, PRODUCT = Average, Sum, Adasum, Min, Max, Product


SyncBatchNorm = _unsupported.function(
    "SyncBatchNorm", "use torch.nn.BatchNorm1d/2d/3d (per-rank statistics)")
PartialDistributedOptimizer = _unsupported.function(
    "PartialDistributedOptimizer", "use DistributedOptimizer (every gradient averaged)")
sparse_allreduce_async = _unsupported.function(
    "sparse_allreduce_async (as a function)",
    "DistributedOptimizer exchanges sparse gradients itself (allgather of indices and values), "
    "or pass sparse_as_dense=True")
run_elastic = _unsupported.function("run_elastic (elastic training)", _unsupported.ELASTIC_HINT)

elastic = _unsupported.elastic_module(__name__ + ".elastic")
_sys.modules[__name__ + ".elastic"] = elastic

# Under concordrun's transparent mode (either Keras backend) the launcher has
# patched Keras to average and shard by itself; a script that uses this API does
# that itself, so the patches are undone (docs/HOROVOD.md, "concordrun and the
# transparent mode").
_explicit.explicit_api("import concord.horovod.torch")
