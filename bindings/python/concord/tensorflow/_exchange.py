"""The gradient exchange shared by concord.horovod's DistributedOptimizer and
DistributedGradientTape and by concordrun's transparent mode: grouping,
compression, pre/post-scaling and local accumulation (k backward passes per
exchange)."""
from __future__ import annotations

import tensorflow as tf

import concord.tensorflow as _ctf
from concord.tensorflow.compression import Compression


def grouped_allreduce(tensors, op="avg", compression=Compression.none, prescale=1.0,
                      postscale=1.0, names=None):
    """concord.tensorflow.grouped_allreduce with compression: dense tensors are
    compressed, reduced as one group (scaled by the engine) and decompressed;
    tf.IndexedSlices are allgathered (and scaled); None stays None."""
    tensors = list(tensors)
    sent, ctxs = [], []
    for t in tensors:
        if t is None or isinstance(t, tf.IndexedSlices):
            sent.append(t)
            ctxs.append(None)
        else:
            s, c = compression.compress(tf.convert_to_tensor(t))
            sent.append(s)
            ctxs.append(c)
    reduced = _ctf.grouped_allreduce(sent, op=op, names=names, prescale=prescale,
                                     postscale=postscale)
    return [r if r is None or isinstance(t, tf.IndexedSlices) else compression.decompress(r, c)
            for t, r, c in zip(tensors, reduced, ctxs)]


class GradientReducer:
    """How gradients are reduced over ranks: op ("avg", "sum", ...), compression,
    scaling, grouping (groups of variables, or num_groups parts) and
    sparse_as_dense."""

    def __init__(self, op="avg", compression=Compression.none, prescale=1.0, postscale=1.0,
                 sparse_as_dense=False, num_groups=0, groups=None):
        if num_groups < 0:
            raise ValueError(f"concord: num_groups must be >= 0, not {num_groups}")
        self.op, self.compression = op, compression
        self.prescale, self.postscale = prescale, postscale
        self.sparse_as_dense = sparse_as_dense
        self.num_groups, self.groups = num_groups, groups

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
        """The gradients reduced over ranks, in order; None stays None."""
        grads = list(grads)
        if self.sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in grads]
        names = _ctf._grad_names(variables)
        out = [None] * len(grads)
        for idx in self._index_groups(variables):
            reduced = grouped_allreduce([grads[i] for i in idx], op=self.op,
                                        compression=self.compression, prescale=self.prescale,
                                        postscale=self.postscale, names=[names[i] for i in idx])
            for i, r in zip(idx, reduced):
                out[i] = r
        return out


class Accumulator:
    """k backward passes per exchange: gradients summed locally, one exchange
    and one optimizer step on the k-th pass (the sum divided by k when
    `average`). Its variables live outside any tf.function (tf.init_scope), as
    the optimizer's own do."""

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


def apply_with_exchange(optimizer, original, reducer, accumulator, grads, variables, *args,
                        **kwargs):
    """original(optimizer, reduced grads, variables): every call, or, with an
    accumulator, on every k-th call with the accumulated gradients."""
    grads = list(grads)
    if accumulator is None:
        return original(optimizer, reducer.reduce(grads, variables), variables, *args, **kwargs)
    if not optimizer.built:
        optimizer.build(variables)
    if accumulator.sums is None:
        accumulator.build(variables)
    count = accumulator.add(grads)

    def exchange():
        summed = accumulator.take(grads)
        original(optimizer, reducer.reduce(summed, variables), variables, *args, **kwargs)
        accumulator.reset()
        return tf.constant(True)

    return tf.cond(tf.equal(count % accumulator.k, 0), exchange, lambda: tf.constant(False))
