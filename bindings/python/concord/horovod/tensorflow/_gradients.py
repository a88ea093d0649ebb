"""Horovod's gradient exchange: DistributedGradientTape and DistributedOptimizer
(Keras 3 optimizers), with compression, gradient_predivide_factor, groups,
sparse_as_dense and local accumulation (backward_passes_per_step)."""
from __future__ import annotations

import tensorflow as tf

from concord import tensorflow as _ctf
from concord.horovod import _basics, _unsupported
from concord.horovod.tensorflow import _collectives
from concord.horovod.tensorflow.compression import Compression


class GradientReducer:
    """How gradients are averaged over ranks: one decision for the tape and the
    optimizer."""

    def __init__(self, compression=Compression.none, sparse_as_dense=False, op=None,
                 gradient_predivide_factor=1.0, num_groups=0, groups=None, process_set=None):
        _basics.check_process_set(process_set)
        op = _basics.Average if op is None else op
        _basics.op_name(op)  # rejects Adasum and unknown ops now, not at the first step
        if gradient_predivide_factor != 1.0 and op != _basics.Average:
            raise ValueError("concord.horovod: gradient_predivide_factor needs op=hvd.Average")
        if groups is not None and num_groups:
            raise ValueError("concord.horovod: give groups= or num_groups=, not both")
        if isinstance(groups, int):
            groups, num_groups = None, groups
        if num_groups < 0:
            raise ValueError(f"concord.horovod: num_groups must be >= 0, not {num_groups}")
        self.compression, self.sparse_as_dense = compression, sparse_as_dense
        self.op, self.predivide = op, float(gradient_predivide_factor)
        self.num_groups, self.groups = num_groups, groups

    def _scales(self):
        """(op, prescale, postscale): with a predivide factor f, Average is a Sum
        of gradients divided by f before and multiplied by f/size after."""
        if self.predivide != 1.0:
            return _basics.Sum, 1.0 / self.predivide, self.predivide / _basics.size()
        return self.op, 1.0, 1.0

    def _index_groups(self, variables):
        n = len(variables)
        if self.groups is not None:
            position = {id(v): i for i, v in enumerate(variables)}
            grouped, seen = [], set()
            for group in self.groups:
                idx = [position[id(v)] for v in group if id(v) in position]
                seen.update(idx)
                if idx:
                    grouped.append(idx)
            return grouped + [[i] for i in range(n) if i not in seen]
        if self.num_groups:
            k = min(self.num_groups, n) or 1
            return [list(range(n))[g::k] for g in range(k)]
        return [list(range(n))]

    def reduce(self, grads, variables):
        """The gradients averaged (op) over ranks, in the same structure; None stays None."""
        grads = list(grads)
        if self.sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in grads]
        if _basics.size() == 1 and self.op in (_basics.Average, _basics.Sum):
            return grads
        op, prescale, postscale = self._scales()
        names = _ctf._grad_names(variables)
        out = [None] * len(grads)
        for idx in self._index_groups(variables):
            reduced = _collectives.grouped_allreduce(
                [grads[i] for i in idx], compression=self.compression, op=op,
                prescale_factor=prescale, postscale_factor=postscale,
                names=[names[i] for i in idx])
            for i, r in zip(idx, reduced):
                out[i] = r
        return out


class _DistributedTape:
    """Methods mixed into a copy of the user's tape's class."""

    def gradient(self, target, sources, output_gradients=None, *args, **kwargs):
        grads = super(self._concord_base, self).gradient(target, sources, output_gradients,
                                                          *args, **kwargs)
        flat_sources = tf.nest.flatten(sources)
        reduced = self._concord_reducer.reduce(tf.nest.flatten(grads), flat_sources)
        return tf.nest.pack_sequence_as(grads, reduced)


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=None,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=None, scale_local_gradients=True):
    """The tape, its gradient() returning gradients averaged (op) over ranks. It
    is still a tf.GradientTape (of a subclass of the tape's class)."""
    if not isinstance(gradtape, tf.GradientTape):
        raise TypeError("concord.horovod: DistributedGradientTape wraps a tf.GradientTape, "
                        f"not {type(gradtape).__name__}")
    _ctf._explicit_api("concord.horovod DistributedGradientTape")
    base = type(gradtape)
    cls = type(base.__name__, (base,), {"gradient": _DistributedTape.gradient,
                                        "_concord_base": None})
    cls._concord_base = cls
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._concord_reducer = GradientReducer(compression, sparse_as_dense, op,
                                            gradient_predivide_factor, num_groups, groups,
                                            process_set)
    return tape


class _Accumulator:
    """backward_passes_per_step=k: gradients summed locally over k passes, one
    exchange and one optimizer step on the k-th (the sum divided by k when
    average_aggregated_gradients). The variables' state lives outside any
    tf.function (tf.init_scope), as the optimizer's own does."""

    def __init__(self, k, average):
        self.k, self.average = int(k), bool(average)
        self.counter, self.sums = None, None

    def build(self, variables):
        with tf.init_scope():
            self.counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="concord_backward_passes")
            self.sums = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                     name="concord_grad_sum") for v in variables]

    def add(self, grads):
        for s, g in zip(self.sums, grads):
            if g is not None:
                s.assign_add(tf.convert_to_tensor(g))
        return self.counter.assign_add(1)

    def take(self, grads):
        """The accumulated gradients (None where the pass had None)."""
        out = []
        for s, g in zip(self.sums, grads):
            if g is None:
                out.append(None)
            else:
                v = tf.identity(s)
                out.append(v / tf.cast(self.k, v.dtype) if self.average else v)
        return out

    def reset(self):
        for s in self.sums:
            s.assign(tf.zeros_like(s))


def _distributed_apply(original, reducer, accumulator):
    def apply(self, grads, trainable_variables=None, *args, **kwargs):
        variables = list(trainable_variables if trainable_variables is not None
                         else self._trainable_variables)
        grads = list(grads)
        if accumulator is None:
            return original(self, reducer.reduce(grads, variables), variables, *args, **kwargs)
        if not self.built:
            self.build(variables)
        if accumulator.sums is None:
            accumulator.build(variables)
        count = accumulator.add(grads)

        def exchange():
            summed = accumulator.take(grads)
            original(self, reducer.reduce(summed, variables), variables, *args, **kwargs)
            accumulator.reset()
            return tf.constant(True)

        return tf.cond(tf.equal(count % accumulator.k, 0), exchange, lambda: tf.constant(False))
    return apply


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=None, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=None, scale_local_gradients=True):
    """The Keras 3 optimizer, its apply()/apply_gradients() averaging (op) the
    gradients over ranks first. Returns the same object (Keras sees its own
    type, and saves it as such)."""
    import keras
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        if isinstance(optimizer, tf.compat.v1.train.Optimizer):
            _unsupported.fail("DistributedOptimizer for tf.compat.v1.train optimizers "
                              "(TensorFlow 1 graphs)",
                              "use a Keras optimizer, or DistributedGradientTape")
        raise TypeError("concord.horovod: DistributedOptimizer wraps a Keras optimizer, not "
                        f"{type(optimizer).__name__}")
    if getattr(optimizer, "_concord_wrapped", False):
        raise ValueError("concord.horovod: this optimizer is wrapped already (DistributedOptimizer "
                         "twice would average twice)")
    if int(backward_passes_per_step) < 1:
        raise ValueError("concord.horovod: backward_passes_per_step must be >= 1, not "
                         f"{backward_passes_per_step}")
    _ctf._explicit_api("concord.horovod DistributedOptimizer")
    reducer = GradientReducer(compression, sparse_as_dense, op, gradient_predivide_factor,
                              num_groups, groups, process_set)
    k = int(backward_passes_per_step)
    accumulator = _Accumulator(k, average_aggregated_gradients) if k > 1 else None
    bound = _distributed_apply(type(optimizer).apply, reducer, accumulator)
    optimizer.apply = bound.__get__(optimizer, type(optimizer))
    optimizer._concord_wrapped = True
    return optimizer
