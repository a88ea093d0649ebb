"""fit/evaluate inputs as the TensorFlow transparent mode reads them: numpy
arrays (and lists/dicts of them; which inputs are arrays is
concord.transparent.arrays's) made into datasets, and rank r's strided share
of every batch of a dataset (concord.transparent.batches's rule, in tf.data)."""
from __future__ import annotations

from concord.data._tf import gathered_batches, steady_pipeline
from concord.transparent.arrays import as_tuples, floatx, num_samples


def numpy_dataset(x, y, sample_weight, batch, seed):
    """Batches of the arrays: in order when seed is None, else in a new
    permutation every epoch (every iteration of the dataset). The permutation
    depends on seed and the epoch only (a stateless index shuffle), not on TF's
    global seed, which a script may set differently on each rank: with the same
    seed every rank draws the same permutation, so a global batch holds the same
    samples everywhere and the ranks' strided shares partition it."""
    import tensorflow as tf
    x, y, sample_weight = (floatx(as_tuples(s)) for s in (x, y, sample_weight))
    parts = (x,) if y is None else (x, y) if sample_weight is None else (x, y, sample_weight)
    if seed is None:
        return steady_pipeline(tf.data.Dataset.from_tensor_slices(parts).batch(batch))
    n = num_samples(x)
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

