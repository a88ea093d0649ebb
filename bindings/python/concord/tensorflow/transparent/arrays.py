"""fit/evaluate inputs as the transparent mode reads them: numpy arrays (and
lists/dicts of them) made into datasets, and rank r's strided share of every
batch of a dataset."""
from __future__ import annotations

import math

from concord.data._tf import gathered_batches, steady_pipeline


def as_tuples(s):
    """Lists become tuples, recursively: tf.data takes a list for one tensor
    (fit([x1, x2], y) means two inputs), a tuple for a structure."""
    if isinstance(s, (list, tuple)) and not hasattr(s, "_fields"):
        return tuple(as_tuples(i) for i in s)
    if isinstance(s, dict):
        return {k: as_tuples(v) for k, v in s.items()}
    return s


def _is_numpy_like(s):
    """A numpy array, or a (nested) list/tuple/dict of them."""
    import numpy as np
    import tensorflow as tf
    if s is None:
        return False
    leaves = tf.nest.flatten(as_tuples(s))
    return bool(leaves) and all(isinstance(a, np.ndarray) and a.ndim >= 1 for a in leaves)


def numpy_inputs(x, y, sample_weight):
    """Whether fit/evaluate's (x, y, sample_weight) can become a sharded dataset."""
    if not _is_numpy_like(x):
        return False
    if y is None:
        return sample_weight is None  # (x, sample_weight) has no dataset form
    return _is_numpy_like(y) and (sample_weight is None or _is_numpy_like(sample_weight))


def _num_samples(x):
    import tensorflow as tf
    return len(tf.nest.flatten(as_tuples(x))[0])


def split_arrays(arrays, validation_split):
    """Keras's validation_split on arrays: the last fraction, before shuffling
    (keras.src.trainers.data_adapters.array_slicing.train_validation_split)."""
    import tensorflow as tf
    n = _num_samples(arrays[0])
    split_at = int(math.floor(n * (1.0 - validation_split)))
    if split_at == 0 or split_at == n:
        raise ValueError(
            f"Training data contains {n} samples, which is not sufficient to split it into a "
            f"validation and training set as specified by `validation_split={validation_split}`. "
            "Either provide more data, or a different value for the `validation_split` argument.")

    def part(a, b):
        return tuple(None if s is None else tf.nest.map_structure(lambda t: t[a:b], as_tuples(s))
                     for s in arrays)

    return part(0, split_at), part(split_at, n)


def _floatx(s):
    """Floating arrays in Keras's floatx, as Keras's own array adapter casts them."""
    import keras
    import numpy as np
    import tensorflow as tf
    floatx = np.dtype(keras.backend.floatx())
    if s is None:
        return None
    return tf.nest.map_structure(
        lambda a: a.astype(floatx) if np.issubdtype(a.dtype, np.floating) and a.dtype != floatx
        else a, s)


def numpy_dataset(x, y, sample_weight, batch, seed):
    """Batches of the arrays: in order when seed is None, else in a new
    permutation every epoch (every iteration of the dataset). The permutation
    depends on seed and the epoch only (a stateless index shuffle), not on TF's
    global seed, which a script may set differently on each rank: with the same
    seed every rank draws the same permutation, so a global batch holds the same
    samples everywhere and the ranks' strided shares partition it."""
    import tensorflow as tf
    x, y, sample_weight = (_floatx(as_tuples(s)) for s in (x, y, sample_weight))
    parts = (x,) if y is None else (x, y) if sample_weight is None else (x, y, sample_weight)
    if seed is None:
        return steady_pipeline(tf.data.Dataset.from_tensor_slices(parts).batch(batch))
    n = _num_samples(x)
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)  # counts the iterations

    def permutation(_):
        key = tf.stack([tf.constant(seed, tf.int64), epoch.assign_add(1)])
        return tf.random.experimental.index_shuffle(tf.range(n, dtype=tf.int64), key,
                                                    tf.constant(n - 1, tf.int64))

    order = (tf.data.Dataset.from_tensors(0).map(permutation).unbatch()
             .apply(tf.data.experimental.assert_cardinality(n)))
    return gathered_batches(order.batch(batch), parts)


def static_batch(ds):
    """The batch dimension of a dataset's elements where it is static, else None."""
    import tensorflow as tf
    leaves = tf.nest.flatten(ds.element_spec)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    if shape is None or shape.rank is None or shape.rank == 0:
        return None
    return shape[0]


def slice_batches(ds, rank, size):
    """Rank r's strided share of every batch of a batched dataset (the element
    structure and the cardinality kept): samples r, r+N, ... No rank may get an
    empty batch, and every rank must run the same number of steps: a batch of k
    < N samples (the last one) is shared, rank r takes its sample r mod k. (For
    k = 1 the averaged gradient is that sample's, as in one process.)"""
    import tensorflow as tf

    def cut(e):
        n = tf.shape(tf.nest.flatten(e)[0])[0]
        start = rank % tf.maximum(n, 1)
        return tf.nest.map_structure(lambda t: t[start::size], e)

    if isinstance(ds.element_spec, tuple):  # tf.data passes a tuple's parts as arguments
        return ds.map(lambda *e: cut(e))
    return ds.map(cut)

