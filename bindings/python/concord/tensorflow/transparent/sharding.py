"""How the TensorFlow transparent mode shards fit()/evaluate() inputs over
ranks: the global batch split by stride (concord.transparent.batches), numpy
arrays and tf.data datasets (concord.data's readers are sharded already). p is
the Patcher."""
from __future__ import annotations

from concord.tensorflow.transparent.arrays import numpy_dataset, slice_batches, static_batch
from concord.transparent.arrays import numpy_inputs
from concord.transparent.batches import global_batch, shuffle_seed


def shard_numpy(p, x, y, sample_weight, batch_size, shuffle):
    batch = global_batch(p, batch_size)
    seed = shuffle_seed(p) if shuffle else None
    return slice_batches(numpy_dataset(x, y, sample_weight, batch, seed), p.rank, p.size)


def shard_dataset(p, ds):
    static = static_batch(ds)
    if static is not None and static < p.size:
        raise ValueError(
            f"concord: the dataset's batches hold {static} samples, fewer than the number of "
            f"ranks ({p.size}): the batch is the global batch, split over the ranks, and "
            f"every rank needs at least one sample of it. Batch by {p.size} or more.")
    return slice_batches(ds, p.rank, p.size)


def shard(p, x, y, sample_weight, batch_size, shuffle):
    """(x, y, sample_weight, from_numpy) for fit/evaluate inputs, or None when
    they are left alone."""
    if p.size == 1:
        return None
    from concord import data  # read by concord.data: each rank holds its share already
    if any(data.is_sharded(a) for a in (x, y, sample_weight)):
        # Any of them a reader's (np.asarray(x) drops the mark of x alone): they
        # hold this rank's share, and sharding them again would drop samples.
        return data.fit_inputs(x, y, sample_weight, lambda: global_batch(p, batch_size),
                               shuffle)
    if numpy_inputs(x, y, sample_weight):
        return shard_numpy(p, x, y, sample_weight, batch_size, shuffle), None, None, True
    if isinstance(x, p.tf.data.Dataset):
        return shard_dataset(p, x), y, sample_weight, False
    p.say_once("input", f"inputs of type {type(x).__name__} are not sharded: every rank "
                        "takes all of them")
    return None


def shard_validation(p, validation_data, batch_size):
    """fit()'s validation_data, sharded (a dataset where it was arrays), or
    None when left alone."""
    from concord import data  # read by concord.data: each rank holds its share already
    if data.is_sharded(validation_data):
        return data.validation_inputs(validation_data, lambda: global_batch(p, batch_size))
    if isinstance(validation_data, p.tf.data.Dataset):
        return shard_dataset(p, validation_data)
    if isinstance(validation_data, (tuple, list)) and 1 <= len(validation_data) <= 3:
        vx, vy, vw = (tuple(validation_data) + (None, None))[:3]
        if numpy_inputs(vx, vy, vw):
            return shard_numpy(p, vx, vy, vw, batch_size, False)
    return None
