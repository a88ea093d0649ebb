"""tf.data datasets over a rank's share, and what the transparent mode
(concord.tensorflow.run) needs to leave such data unsharded."""
from __future__ import annotations

import itertools
import operator
import warnings
from typing import Optional

import numpy as np

from . import _shard
from ._agree import gather_ints, rank_size


class ShardArray(np.ndarray):
    """A numpy array holding one rank's share (from a concord.data reader).
    Slices and numpy operations on it keep the type; np.asarray() drops it."""


def mark(a: Optional[np.ndarray]):
    return None if a is None else a.view(ShardArray)


_MARK = "_concord_data_sharded"


def _dataset_is_sharded(ds) -> bool:
    todo, seen = [ds], set()
    while todo:
        d = todo.pop()
        if id(d) in seen:
            continue
        seen.add(id(d))
        if getattr(d, _MARK, False):
            return True
        try:
            todo.extend(d._inputs())  # tf.data's private input walk: ds.map(...) of ours
        except Exception:  # noqa: BLE001 - not every dataset lists its inputs
            pass
    return False


def is_sharded(data) -> bool:
    """Whether `data` (arrays, lists/tuples/dicts of them, or a tf.data
    dataset) came from a concord.data reader and so holds this rank's share."""
    if isinstance(data, ShardArray):
        return True
    if isinstance(data, dict):
        return any(is_sharded(v) for v in data.values())
    if isinstance(data, (list, tuple)):
        return any(is_sharded(v) for v in data)
    if hasattr(data, "_inputs") and hasattr(data, "element_spec"):
        return _dataset_is_sharded(data)
    return False


def _seed_value(seed) -> int:
    """`seed` as a non-negative int64 (what default_rng([seed, epoch]) takes),
    -1 when it is not one."""
    try:
        value = operator.index(seed)
    except TypeError:
        return -1
    return value if 0 <= value < 2**63 else -1


def common_seed(seed) -> int:
    """Rank 0's seed (drawn from numpy's global generator when None) everywhere.
    Checked here, on every rank: a negative seed failed only when the dataset
    was iterated (inside tf.data), and one of 2**63 or more raised on rank 0
    alone, before the broadcast the others waited in."""
    import concord
    mine = np.random.randint(0, 2**31 - 1) if seed is None else _seed_value(seed)
    if rank_size()[1] > 1:
        mine = int(concord.broadcast(np.array([mine], np.int64), 0, name="concord.data/seed")[0])
    if mine < 0:
        given = f"{seed!r}" if rank_size()[0] == 0 else "rank 0's"
        raise ValueError(f"concord.data: the seed must be an integer, 0 <= seed < 2**63; "
                         f"{given} is not")
    return mine


def per_rank_batch(batch_size: int, size: int) -> int:
    if batch_size < size:
        raise ValueError(f"concord.data: batch_size {batch_size} is smaller than the number of "
                         f"ranks ({size}): it is the global batch, split over the ranks")
    if batch_size % size and rank_size()[0] == 0:
        warnings.warn(f"concord.data: batch_size {batch_size} is not a multiple of {size} ranks; "
                      f"each rank takes {batch_size // size} samples a batch", stacklevel=3)
    return batch_size // size


def dataset(arrays, local_rows: int, full_rows: int, rows: int, batch: int, seed):
    """A tf.data dataset of this rank's batches of `arrays` (a tuple), a new
    order every iteration (epoch) when seed is not None.

    The arrays become tensors once and every batch is a tf.gather of them, in
    TensorFlow; Python runs once an epoch, to draw the epoch's order. (A
    Dataset.from_generator yielding numpy batches made every training step
    1.3-2x slower on a pinned core: docs/DATA.md, "The pipeline".) Like
    Keras's own adapter for numpy arrays, each dataset holds a TensorFlow copy
    of the arrays (gathered_batches)."""
    import tensorflow as tf
    epochs = itertools.count()
    steps = len(_shard.batches(local_rows, full_rows, rows, batch, None, 0))

    def epoch_order():  # this epoch's batches: positions, and each batch's length
        parts = _shard.batches(local_rows, full_rows, rows, batch, seed, next(epochs))
        return (np.concatenate(parts).astype(np.int64),
                np.array([len(p) for p in parts], dtype=np.int64))

    def batches_of_epoch(_):
        positions, lengths = tf.numpy_function(epoch_order, [], (tf.int64, tf.int64),
                                               stateful=True)
        positions.set_shape([None])
        lengths.set_shape([None])
        ragged = tf.RaggedTensor.from_row_lengths(positions, lengths, validate=False)
        return tf.data.Dataset.from_tensor_slices(ragged)

    positions = (tf.data.Dataset.from_tensors(0).flat_map(batches_of_epoch)
                 .apply(tf.data.experimental.assert_cardinality(steps)))
    ds = gathered_batches(positions, tuple(arrays))
    setattr(ds, _MARK, True)
    return ds


def gathered_batches(positions, parts):
    """A dataset of `parts` (a structure of numpy arrays) gathered at each
    element of `positions` (a dataset of index vectors): the arrays become
    tensors once, in host memory (tf.data runs on the CPU; on a GPU host the
    default device would put them on the GPU and every batch would come back
    through PCIe), and the pipeline is steady_pipeline's."""
    import tensorflow as tf
    with tf.device("/CPU:0"):
        tensors = tf.nest.map_structure(tf.convert_to_tensor, parts)
    return steady_pipeline(positions.map(
        lambda p: tf.nest.map_structure(lambda t: tf.gather(t, p), tensors)))


def steady_pipeline(ds):
    """`ds` with tf.data's autotuning off and two batches prefetched. With
    autotuning on, destroying an epoch's iterator waits for the tuner's thread
    to wake from its sleep: 0.9-5 s at the start of an epoch on one rank while
    the others wait for it in their first allreduce (docs/DATA.md). A gather
    per batch needs no tuning. tf.data options hold for the whole pipeline:
    maps a user adds on top run untuned too, unless the user's own
    with_options turns autotuning back on (later options win)."""
    import tensorflow as tf
    options = tf.data.Options()
    options.autotune.enabled = False
    return ds.prefetch(2).with_options(options)


def array_dataset(x, y, sample_weight, batch_size, shuffle, seed=None):
    """Arrays that hold this rank's share (ShardArray) batched like a reader's
    as_dataset(): the ranks' lengths decide the rows."""
    if y is None and sample_weight is not None:
        # (x, w) would read as (x, y): the weights would train as labels.
        raise ValueError("concord.data: sample_weight without y: a dataset of (x, "
                         "sample_weight) would take the weights for labels; pass y as well")
    size = rank_size()[1]
    named = [(n, np.asarray(a)) for n, a in (("x", x), ("y", y), ("sample_weight", sample_weight))
             if a is not None]
    lengths = gather_ints([len(a) for _, a in named], "lengths")  # a row per rank
    _check_lengths(lengths, [n for n, _ in named])
    parts = tuple(a for _, a in named)
    seed = common_seed(seed) if shuffle else None
    return dataset(parts, len(parts[0]), int(lengths[:, 0].min()), int(lengths[:, 0].max()),
                   per_rank_batch(batch_size, size), seed)


def _check_lengths(lengths, names):
    """Every rank's arrays the same length, or an error on every rank (each
    has every rank's lengths). A reader's x holds this rank's share: a y read
    otherwise (the whole data set's labels, say) would be paired by position
    with samples that are not its own, without an error."""
    for rank, row in enumerate(lengths):
        if (row != row[0]).any():
            held = ", ".join(f"{n} {int(k)}" for n, k in zip(names, row))
            raise ValueError(
                f"concord.data: fit()'s arrays hold different numbers of samples on rank {rank} "
                f"({held}): a reader's arrays are that rank's share of the data set, and the "
                "others must be the same share (read the labels with the same reader, label=)")


def fit_inputs(x, y, sample_weight, global_batch, shuffle):
    """For the transparent mode: data a reader sharded, not sharded again.
    None for a dataset (left as it is); for arrays (dataset, None, None, True)
    batched by global_batch() (the launcher's global batch size)."""
    if not isinstance(x, (np.ndarray, list, tuple, dict)):
        return None
    if not all(a is None or isinstance(a, np.ndarray) for a in (x, y, sample_weight)):
        raise ValueError("concord.data: pass a reader's arrays to fit() as x and y arrays "
                         "(not lists or dicts), or use reader.as_dataset()")
    return array_dataset(x, y, sample_weight, global_batch(), shuffle), None, None, True


def validation_inputs(validation_data, global_batch):
    """fit()'s validation_data from a reader: a dataset as it is, arrays batched
    by global_batch()."""
    if not isinstance(validation_data, (tuple, list)):
        return validation_data
    vx, vy, vw = (tuple(validation_data) + (None, None))[:3]
    return array_dataset(vx, vy, vw, global_batch(), False)
