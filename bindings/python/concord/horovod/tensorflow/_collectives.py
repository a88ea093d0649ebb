"""Horovod's TensorFlow collectives (allreduce, allgather, broadcast, ...) on
concord.tensorflow's ops and concord's engine."""
from __future__ import annotations

import itertools

import tensorflow as tf

import concord as _concord_py
from concord import tensorflow as _ctf
from concord.tensorflow import _exchange
from concord.horovod import _basics
from concord.horovod._objects import allgather_object, broadcast_object  # noqa: F401
from concord.horovod.tensorflow.compression import Compression

_counter = itertools.count()


def engine_op(name: str):
    """concord.tensorflow's op `name`, or an error naming it where this build of
    concord has no such op."""
    fn = getattr(_ctf, name, None)
    if fn is None:
        raise NotImplementedError(
            f"concord.horovod: hvd.{name} needs concord.tensorflow.{name}, which this build of "
            "concord's engine does not provide")
    return fn


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=None, ignore_name_scope=False):
    """op (default Average) over every rank of prescale_factor * tensor, times
    postscale_factor. tf.IndexedSlices are allgathered (values and indices), as
    Horovod does; Average then divides the values by size()."""
    _basics.check_process_set(process_set)
    op_name = _basics.op_name(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        if op_name not in ("sum", "avg"):
            raise NotImplementedError(
                "concord.horovod: allreduce of tf.IndexedSlices supports Average and Sum only "
                "(use sparse_as_dense=True for other ops)")
        return _ctf.allreduce(tensor, op=op_name, name=name, prescale=prescale_factor,
                              postscale=postscale_factor)
    tensor = tf.convert_to_tensor(tensor)
    sent, ctx = compression.compress(tensor)
    reduced = _ctf.allreduce(sent, op=op_name, name=_ctf._clean(name) if name else None,
                             prescale=prescale_factor, postscale=postscale_factor)
    return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None, names=None):
    """allreduce of a list of tensors as one group (fused by the engine)."""
    _basics.check_process_set(process_set)
    return _exchange.grouped_allreduce(tensors, op=_basics.op_name(op, average),
                                       compression=compression, prescale=prescale_factor,
                                       postscale=postscale_factor, names=names)


def allgather(tensor, name=None, ignore_name_scope=False, process_set=None):
    """Every rank's tensor concatenated along the first dimension (which may
    differ between ranks)."""
    _basics.check_process_set(process_set)
    return _ctf.allgather(tensor, name=_ctf._clean(name) if name else None)


def grouped_allgather(tensors, name=None, process_set=None):
    return [allgather(t, name=f"{name}.{i}" if name else None, process_set=process_set)
            for i, t in enumerate(tensors)]


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=None):
    """root_rank's tensor on every rank."""
    _basics.check_process_set(process_set)
    _basics.check_root(root_rank)
    return _ctf.broadcast(tensor, root_rank=root_rank, name=_ctf._clean(name) if name else None)


def broadcast_variables(variables, root_rank, process_set=None, inplace=False):
    """Assigns root_rank's values to `variables` on every rank (same list, same
    order, on every rank)."""
    _basics.check_process_set(process_set)
    _basics.check_root(root_rank)
    _ctf.broadcast_variables(list(variables), root_rank=root_rank,
                             prefix=f"hvd.bcast.{next(_counter)}")


def broadcast_(variables, root_rank, name=None, process_set=None):
    """In-place broadcast of variables (Horovod >= 0.24); returns them."""
    broadcast_variables(variables, root_rank, process_set=process_set)
    return variables


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=None):
    """Scatters slices of tensor's first dimension (splits[i] rows to rank i,
    equal parts by default) and gathers what every rank sent to this one.
    Returns (received, received_splits), as Horovod does."""
    _basics.check_process_set(process_set)
    return engine_op("alltoall")(tensor, splits=splits, name=name)


def reducescatter(tensor, device_dense="", compression=Compression.none, op=None, name=None,
                  process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """op (default Average) over ranks, this rank keeping its part of the first
    dimension."""
    _basics.check_process_set(process_set)
    op_name = _basics.op_name(op)
    if op_name not in ("sum", "avg"):
        raise ValueError("concord.horovod: reducescatter supports hvd.Average and hvd.Sum")
    fn = engine_op("reducescatter")
    sent, ctx = compression.compress(tf.convert_to_tensor(tensor))
    out = fn(sent, op=op_name, name=name, prescale=prescale_factor, postscale=postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=None,
                          process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    return [reducescatter(t, compression=compression, op=op, process_set=process_set,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor)
            for t in tensors]


def join(device=""):
    """Marks this rank as out of data: until every rank has joined, it takes part
    in the others' allreduces with zeros. Returns the last rank to join."""
    last = engine_op("join")()
    return int(last) if tf.executing_eagerly() else last


def barrier(process_set=None):
    _basics.check_process_set(process_set)
    _concord_py.barrier()
