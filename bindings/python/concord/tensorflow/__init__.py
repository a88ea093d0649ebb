"""concord as TensorFlow's gradient-reduction backend (TensorFlow 2.21, Keras 3).

    import concord.tensorflow as ctf
    ctf.init()
    tape = ctf.DistributedGradientTape(tf.GradientTape())      # or:
    optimizer = ctf.DistributedOptimizer(keras.optimizers.Adam())
    model.fit(..., callbacks=[ctf.BroadcastInitialWeights(), ctf.MetricAverage()])

Unmodified scripts: ``concordrun -np N python train.py`` (see concord.tensorflow.run).
The ops run on concord's fusion engine, named so that TensorFlow's execution
order cannot deadlock; they work eagerly and inside tf.function (not under XLA).
"""
from __future__ import annotations

import itertools
import os
import sys
import threading
from typing import List, Optional, Sequence

import tensorflow as tf

import concord as _concord_py
from concord import _concord
from concord.transparent import explicit as _explicit

__all__ = ["init", "rank", "size", "local_rank", "local_size", "allreduce", "grouped_allreduce",
           "broadcast", "allgather", "alltoall", "reducescatter", "join", "broadcast_variables", "DistributedGradientTape",
           "DistributedOptimizer", "BroadcastInitialWeights", "MetricAverage"]

_LIB = os.path.join(os.path.dirname(__file__), "libconcord_tf_ops.so")
if not os.path.exists(_LIB):
    raise ImportError(
        "concord was built without its TensorFlow ops (TensorFlow was not importable when "
        "`pip install .` ran): install tensorflow, then reinstall concord")
_ops = tf.load_op_library(_LIB)
# The collectives, stateful ops (concord_ops.cc says why), matched across ranks by name.
_COLLECTIVE_OPS = ("ConcordAllreduce", "ConcordGroupedAllreduce", "ConcordBroadcast",
                   "ConcordAllgather", "ConcordAlltoall", "ConcordReducescatter")


def _run_unordered(op_types) -> None:
    """Makes tf.function run these stateful ops whatever their outputs feed, but not
    in program order. Its automatic control dependencies chain every stateful op
    without a resource input after the one before it: collectives in a different
    order on two ranks would then wait for each other (matched by name, they need
    no order), and each would wait for the one before to finish instead of fusing
    with it. TensorFlow keeps such ops, "must run, order insensitive", in a set of
    its auto_control_deps module, read at every trace. Where this TensorFlow has no
    such set, nothing changes: the ops then run in program order."""
    try:
        from tensorflow.python.framework import auto_control_deps as acd
    except ImportError:
        return
    current = getattr(acd, "MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS", None)
    if isinstance(current, frozenset):
        acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS = current | frozenset(op_types)


_run_unordered(_COLLECTIVE_OPS)
_counter = itertools.count()
_OPS = ("sum", "avg", "min", "max", "prod")


def init() -> None:
    """Starts MPI and concord's engine (collective: call it on every rank)."""
    _start()
    _explicit_api("concord.tensorflow.init()")


def _start() -> None:
    _concord.init()
    _concord.start_engine()


def _explicit_api(what: str) -> None:
    """The script uses the explicit API (`what`): concordrun's transparent patches,
    if any, are undone (concord.transparent.explicit)."""
    _explicit.explicit_api(what)


rank = _concord_py.rank
size = _concord_py.size
local_rank = _concord_py.local_rank
local_size = _concord_py.local_size


def _name(name: Optional[str], kind: str) -> str:
    # Without a name, calls must come in the same order on every rank.
    return name if name else f"concord.tf.{kind}.{next(_counter)}"


def _clean(name: str) -> str:
    return name.replace(":", "_")


def allreduce(tensor, op: str = "avg", name: Optional[str] = None, prescale: float = 1.0,
              postscale: float = 1.0):
    """postscale * op over ranks of prescale * tensor. tf.IndexedSlices (sparse
    gradients) are allgathered instead; with avg their values are divided by size()."""
    if op not in _OPS:
        raise ValueError(f"concord: op must be one of {', '.join(_OPS)}, not {op!r}")
    name = _name(name, "allreduce")
    if isinstance(tensor, tf.IndexedSlices):
        if op not in ("sum", "avg"):
            raise ValueError("concord: IndexedSlices can only be summed or averaged")
        values = allgather(tensor.values, name=name + "/values")
        indices = allgather(tensor.indices, name=name + "/indices")
        scale = postscale * prescale / (size() if op == "avg" else 1)
        if scale != 1.0:
            values = values * tf.cast(scale, values.dtype)
        return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)
    return _ops.concord_allreduce(tensor, reduce_op=op, prescale=prescale, postscale=postscale,
                                  tensor_name=name)


@tf.RegisterGradient("ConcordAllreduce")
def _allreduce_grad(op, grad):
    reduce_op = op.get_attr("reduce_op").decode() if isinstance(op.get_attr("reduce_op"), bytes) \
        else op.get_attr("reduce_op")
    if reduce_op not in ("sum", "avg"):
        return None
    name = op.get_attr("tensor_name")
    name = name.decode() if isinstance(name, bytes) else name
    return _ops.concord_allreduce(grad, reduce_op=reduce_op, prescale=op.get_attr("prescale"),
                                  postscale=op.get_attr("postscale"),
                                  tensor_name=(name or op.name) + "/grad")


def grouped_allreduce(tensors: Sequence, op: str = "avg",
                      names: Optional[Sequence[str]] = None, prescale: float = 1.0,
                      postscale: float = 1.0) -> List:
    """Allreduces tensors as one group (submitted atomically, fused):
    postscale * op over ranks of prescale * tensor. Tensors of different dtypes
    form one group per dtype; IndexedSlices go through allgather."""
    if op not in _OPS:
        raise ValueError(f"concord: op must be one of {', '.join(_OPS)}, not {op!r}")
    tensors = list(tensors)
    if names is None:
        base = _name(None, "group")
        names = [f"{base}.{i}" for i in range(len(tensors))]
    names = [_clean(n) for n in names]
    out = [None] * len(tensors)
    by_dtype = {}
    for i, t in enumerate(tensors):
        if t is None:
            continue
        if isinstance(t, tf.IndexedSlices):
            out[i] = allreduce(t, op=op, name=names[i], prescale=prescale, postscale=postscale)
        else:
            by_dtype.setdefault(tf.as_dtype(t.dtype), []).append(i)
    for dtype, idx in by_dtype.items():
        reduced = _ops.concord_grouped_allreduce([tensors[i] for i in idx], reduce_op=op,
                                                 prescale=prescale, postscale=postscale,
                                                 tensor_names=[names[i] for i in idx])
        for i, r in zip(idx, reduced):
            out[i] = r
    return out


def broadcast(tensor, root_rank: int = 0, name: Optional[str] = None):
    return _ops.concord_broadcast(tensor, root_rank=root_rank,
                                  tensor_name=_name(name, "broadcast"))


def allgather(tensor, name: Optional[str] = None):
    return _ops.concord_allgather(tensor, tensor_name=_name(name, "allgather"))


def _attr_name(op) -> str:
    name = op.get_attr("tensor_name")
    name = name.decode() if isinstance(name, bytes) else name
    return name or op.name


@tf.RegisterGradient("ConcordBroadcast")
def _broadcast_grad(op, grad):
    # As Horovod's: the gradient averaged over ranks, kept on the root (whose
    # tensor every output came from), zeros on the others. Times 0 there, as
    # Horovod, not zeros_like: in a graph, zeros_like of a known shape would let
    # TensorFlow prune the allreduce on those ranks only, and the root wait for it.
    reduced = _ops.concord_allreduce(grad, reduce_op="avg", prescale=1.0, postscale=1.0,
                                     tensor_name=_attr_name(op) + "/grad")
    return reduced if rank() == op.get_attr("root_rank") else reduced * 0


@tf.RegisterGradient("ConcordAllgather")
def _allgather_grad(op, grad):
    # As Horovod's: the gradient of the whole gathered tensor averaged over
    # ranks, then this rank's rows of it, found from every rank's first dimension.
    name = _attr_name(op)
    reduced = _ops.concord_allreduce(grad, reduce_op="avg", prescale=1.0, postscale=1.0,
                                     tensor_name=name + "/grad")
    x = op.inputs[0]
    rows = _ops.concord_allgather(tf.shape(x, out_type=tf.int64)[:1],
                                  tensor_name=name + "/grad/rows")
    start = tf.reduce_sum(rows[:rank()])
    begin = tf.concat([tf.reshape(start, [1]), tf.zeros([tf.rank(x) - 1], tf.int64)], 0)
    return tf.slice(reduced, begin, tf.shape(x, out_type=tf.int64))


def alltoall(tensor, splits=None, name: Optional[str] = None):
    """Rows of dimension 0 to every rank: splits[r] rows go to rank r, in order
    (None: an even split, which size() must allow). Returns (received,
    received_splits): the rows received in rank order, and an int32 vector with
    the rows that came from each rank."""
    if splits is None:
        splits = tf.zeros([0], dtype=tf.int32)
    else:
        splits = tf.cast(tf.convert_to_tensor(splits), tf.int32)
    received, received_splits = _ops.concord_alltoall(tensor, splits,
                                                      tensor_name=_name(name, "alltoall"))
    return received, received_splits


@tf.RegisterGradient("ConcordAlltoall")
def _alltoall_grad(op, grad, _grad_splits):
    # The rows go back where they came from: an alltoall with the received splits.
    back, _ = _ops.concord_alltoall(grad, op.outputs[1], tensor_name=_attr_name(op) + "/grad")
    return [back, None]


def reducescatter(tensor, op: str = "avg", name: Optional[str] = None, prescale: float = 1.0,
                  postscale: float = 1.0):
    """postscale * op over ranks of prescale * tensor, of which this rank keeps its
    block of dimension 0: the first rows % size() ranks get one row more."""
    if op not in _OPS:
        raise ValueError(f"concord: op must be one of {', '.join(_OPS)}, not {op!r}")
    return _ops.concord_reducescatter(tensor, reduce_op=op, prescale=prescale,
                                      postscale=postscale,
                                      tensor_name=_name(name, "reducescatter"))


@tf.RegisterGradient("ConcordReducescatter")
def _reducescatter_grad(op, grad):
    reduce_op = op.get_attr("reduce_op")
    reduce_op = reduce_op.decode() if isinstance(reduce_op, bytes) else reduce_op
    if reduce_op not in ("sum", "avg"):
        return None
    # Every rank's input reached every block: gather the blocks' gradients,
    # scaled as Horovod's _reducescatter_grad (and concord.horovod.torch's):
    # times size() for Sum, as allreduce's gradient (a Sum of every rank's
    # gradient) is size() times a gradient every rank has; not divided for avg.
    gathered = _ops.concord_allgather(grad, tensor_name=_attr_name(op) + "/grad")
    factor = op.get_attr("prescale") * op.get_attr("postscale")
    if reduce_op == "sum":
        factor *= size()
    if factor != 1.0:
        gathered = gathered * tf.cast(factor, gathered.dtype)
    return gathered


def join():
    """This rank has no more data: until every rank has joined, the allreduces the
    other ranks run get zeros from it (broadcast, allgather, alltoall and
    reducescatter fail meanwhile). Returns the last rank to join: an int eagerly,
    an int32 scalar tensor inside tf.function."""
    last = _ops.concord_join()
    return int(last) if tf.executing_eagerly() else last


def broadcast_variables(variables, root_rank: int = 0, prefix: str = "bcast") -> None:
    """Assigns root_rank's values to `variables` on every rank (same order everywhere)."""
    for i, v in enumerate(variables):
        name = _clean(f"{prefix}/{i}/{getattr(v, 'path', None) or v.name}")
        v.assign(broadcast(tf.convert_to_tensor(v), root_rank=root_rank, name=name))


def _grad_names(sources) -> List[str]:
    names = []
    for i, s in enumerate(sources):
        label = getattr(s, "path", None) or getattr(s, "name", None) or "tensor"
        names.append(_clean(f"grad/{i}/{label}"))
    return names


def _zeros_for_missing(grads, sources) -> List:
    """The gradients, a None one (a variable this rank's loss did not use) as
    zeros of its source's shape and dtype: every rank then submits the same
    names (a rank that skipped it would leave the others waiting for it), and
    it gets the others' contribution, as torch's transparent mode and
    Horovod-torch's optimizer do."""
    out = []
    for g, s in zip(grads, sources):
        if g is None:
            shape = tf.TensorShape(getattr(s, "shape", None))
            g = tf.zeros(shape, tf.as_dtype(s.dtype)) if shape.is_fully_defined() \
                else tf.zeros_like(s)
        out.append(g)
    return out


class DistributedGradientTape:
    """Wraps a tf.GradientTape: gradient() returns gradients averaged over ranks."""

    def __init__(self, tape: tf.GradientTape, op: str = "avg"):
        _explicit_api("concord.tensorflow.DistributedGradientTape")
        self._tape = tape
        self._op = op

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def __getattr__(self, attr):
        return getattr(self._tape, attr)

    def gradient(self, target, sources, *args, **kwargs):
        grads = self._tape.gradient(target, sources, *args, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        flat = _zeros_for_missing(tf.nest.flatten(grads), flat_sources)
        reduced = grouped_allreduce(flat, op=self._op, names=_grad_names(flat_sources))
        return tf.nest.pack_sequence_as(grads, reduced)


_averaging = threading.local()


def _averaged_apply(original):
    def apply(self, grads, trainable_variables=None, *args, **kwargs):
        # Only the outermost optimizer averages: a LossScaleOptimizer's inner
        # optimizer then sees the averaged gradients, and every rank agrees on
        # whether the step is skipped.
        if getattr(_averaging, "active", False):
            return original(self, grads, trainable_variables, *args, **kwargs)
        _averaging.active = True
        try:
            variables = trainable_variables if trainable_variables is not None else \
                self._trainable_variables
            grads = grouped_allreduce(_zeros_for_missing(list(grads), variables), op="avg",
                                      names=_grad_names(variables))
            return original(self, grads, trainable_variables, *args, **kwargs)
        finally:
            _averaging.active = False
    return apply


def DistributedOptimizer(optimizer):
    """Makes a Keras 3 optimizer average gradients over ranks before applying them.
    Returns the same object (its apply() is wrapped), so Keras sees its own type."""
    if getattr(optimizer, "_concord_wrapped", False):
        return optimizer
    _explicit_api("concord.tensorflow.DistributedOptimizer")
    original = type(optimizer).apply
    bound = _averaged_apply(original)
    optimizer.apply = bound.__get__(optimizer, type(optimizer))
    optimizer._concord_wrapped = True
    return optimizer


import keras as _keras  # noqa: E402  (after TensorFlow)

from concord.transparent.metrics import GlobalMetrics as _GlobalMetrics  # noqa: E402
from concord.transparent.models import model_built as _model_built  # noqa: E402


class BroadcastInitialWeights(_keras.callbacks.Callback):
    """Broadcasts the model's and optimizer's variables from root_rank before
    the first training step, so every rank starts from the same state."""

    def __init__(self, root_rank: int = 0):
        super().__init__()
        self.root_rank = root_rank
        self._done = False

    def on_train_begin(self, logs=None):
        if self._done:
            return
        if not _model_built(self.model):
            # Keras builds this model (a subclassed one, say) in its first step:
            # its variables do not exist yet, and an optimizer built now would
            # know none of them. Broadcast once that step has built them.
            if rank() == 0:
                print("concord: the model is built by its first training step; its weights are "
                      "broadcast after that step (build the model before fit() to broadcast "
                      "before it)", file=sys.stderr, flush=True)
            return
        self._broadcast()

    def on_train_batch_end(self, batch, logs=None):
        if not self._done:  # on_train_begin left it for the first step
            self._broadcast()

    def _broadcast(self):
        model = self.model
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
        broadcast_variables(model.variables, self.root_rank, prefix="bcast/model")
        if model.optimizer is not None:
            broadcast_variables(model.optimizer.variables, self.root_rank, prefix="bcast/opt")
        self._done = True


class MetricAverage(_GlobalMetrics, _keras.callbacks.Callback):
    """The epoch's logged metrics (and val_ metrics) over every rank, so every
    rank (and rank 0's progress output) reports the global values: Keras's own
    metrics computed from their state summed over ranks, as one process
    computes them; others (a script's own Metric subclass) averaged, which rank
    0 says once (concord.transparent.metrics). Place it before the callbacks
    that read the logs."""
