"""Horovod's DistributedGradientTape and DistributedOptimizer (Keras 3
optimizers) on concord.tensorflow's gradient exchange (_exchange)."""
from __future__ import annotations

import tensorflow as tf

from concord import tensorflow as _ctf
from concord.horovod import _basics, _unsupported
from concord.tensorflow import _exchange
from concord.tensorflow.compression import Compression


def _reducer(compression, sparse_as_dense, op, gradient_predivide_factor, num_groups, groups,
             process_set):
    """Horovod's options as a GradientReducer. With a predivide factor f,
    Average is a Sum of gradients divided by f before and by size/f after."""
    _basics.check_process_set(process_set)
    op = _basics.Average if op is None else op
    name = _basics.op_name(op)  # rejects Adasum and unknown ops now, not at the first step
    prescale = postscale = 1.0
    if gradient_predivide_factor != 1.0:
        if op != _basics.Average:
            raise ValueError("concord.horovod: gradient_predivide_factor needs op=hvd.Average")
        name = "sum"
        prescale = 1.0 / gradient_predivide_factor
        postscale = gradient_predivide_factor / _basics.size()
    if groups is not None and num_groups:
        raise ValueError("concord.horovod: give groups= or num_groups=, not both")
    if isinstance(groups, int):
        groups, num_groups = None, groups
    return _exchange.GradientReducer(name, compression, prescale, postscale, sparse_as_dense,
                                     num_groups, groups)


def _gradient(self, target, sources, output_gradients=None, *args, **kwargs):
    grads = super(self._concord_class, self).gradient(target, sources, output_gradients,
                                                       *args, **kwargs)
    reduced = self._concord_reducer.reduce(tf.nest.flatten(grads), tf.nest.flatten(sources))
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
    reducer = _reducer(compression, sparse_as_dense, op, gradient_predivide_factor, num_groups,
                       groups, process_set)
    _ctf._explicit_api("concord.horovod DistributedGradientTape")
    base = type(gradtape)
    cls = type(base.__name__, (base,), {"gradient": _gradient})
    cls._concord_class = cls
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._concord_reducer = reducer
    return tape


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=None, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=None, scale_local_gradients=True):
    """The Keras 3 optimizer, its apply()/apply_gradients() averaging (op) the
    gradients over ranks first; with backward_passes_per_step=k, summing them
    locally over k calls and exchanging (and stepping) on the k-th, the sum
    divided by k if average_aggregated_gradients. Returns the same object (Keras
    sees its own type, and saves it as such)."""
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
    k = int(backward_passes_per_step)
    if k < 1:
        raise ValueError("concord.horovod: backward_passes_per_step must be >= 1, not "
                         f"{backward_passes_per_step}")
    reducer = _reducer(compression, sparse_as_dense, op, gradient_predivide_factor, num_groups,
                       groups, process_set)
    _ctf._explicit_api("concord.horovod DistributedOptimizer")
    accumulator = _exchange.Accumulator(k, average_aggregated_gradients) if k > 1 else None
    original = type(optimizer).apply

    def apply(self, grads, trainable_variables=None, *args, **kwargs):
        variables = list(trainable_variables if trainable_variables is not None
                         else self._trainable_variables)
        return _exchange.apply_with_exchange(self, original, reducer, accumulator, grads,
                                             variables, *args, **kwargs)

    optimizer.apply = apply.__get__(optimizer, type(optimizer))
    optimizer._concord_wrapped = True
    return optimizer
