"""Horovod's Keras API on concord (Keras 3, TensorFlow 2.21):

    import concord.horovod.tensorflow.keras as hvd   # was: import horovod.tensorflow.keras as hvd

docs/HOROVOD.md lists every name and how concord provides it.
"""
from __future__ import annotations

import sys as _sys

import tensorflow as _tf

from concord.horovod import _unsupported
from concord.horovod._basics import (  # noqa: F401
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, add_process_set, ccl_built,
    cross_rank, cross_size, cuda_built, ddl_built, global_process_set, gloo_built,
    gloo_enabled, init, is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
    mpi_enabled, mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built,
    shutdown, size, start_timeline, stop_timeline)
from concord.horovod import tensorflow as _hvd_tf
from concord.horovod.tensorflow import (  # noqa: F401
    PartialDistributedOptimizer, SyncBatchNormalization, allgather_object,
    broadcast_global_variables, broadcast_object, join)
from concord.horovod.tensorflow._gradients import DistributedOptimizer  # noqa: F401
from concord.horovod.tensorflow.compression import Compression  # noqa: F401
from concord.horovod.tensorflow.keras import callbacks  # noqa: F401


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none, process_set=None):
    """allreduce of a value (a number, array or tensor); returns a tensor."""
    return _hvd_tf.allreduce(_tf.constant(value) if not _tf.is_tensor(value) else value,
                             average=average, op=op, compression=compression,
                             prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                             name=name, process_set=process_set)


def allgather(value, name=None, process_set=None):
    return _hvd_tf.allgather(_tf.convert_to_tensor(value), name=name, process_set=process_set)


def broadcast(value, root_rank, name=None, process_set=None):
    return _hvd_tf.broadcast(_tf.convert_to_tensor(value), root_rank, name=name,
                             process_set=process_set)


def reducescatter(value, name=None, op=None, process_set=None):
    return _hvd_tf.reducescatter(_tf.convert_to_tensor(value), op=op, name=name,
                                 process_set=process_set)


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none):
    """keras.models.load_model, its optimizer made a DistributedOptimizer."""
    import keras
    objects = dict(custom_objects or {})
    for opt in custom_optimizers or []:
        objects[opt.__name__] = opt
    model = keras.models.load_model(filepath, custom_objects=objects or None)
    if getattr(model, "optimizer", None) is not None:
        DistributedOptimizer(model.optimizer, compression=compression)
    return model


elastic = _unsupported.elastic_module(__name__ + ".elastic")
_sys.modules[__name__ + ".elastic"] = elastic
