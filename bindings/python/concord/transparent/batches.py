"""How the transparent mode splits fit()'s batches over the ranks, whatever
Keras's backend. The script's batch_size is the global batch; rank r takes
samples r, r+N, ... of every batch (strided), so each step reduces over the
samples a single process would. Every rank runs the same number of steps and
none gets an empty batch: a batch of k < N samples (the last one) is shared,
rank r taking its sample r mod k (for k = 1 the averaged gradient is that
sample's, as in one process). TensorFlow applies the rule in tf.data
(concord.tensorflow.transparent.arrays.slice_batches), torch here, in numpy."""
from __future__ import annotations

from concord.transparent.collective import from_rank0


def global_batch(p, batch_size):
    """fit()'s global batch (Keras's default 32; N times the script's with
    --per-rank-batch), refused where a rank would get no sample of it."""
    batch = batch_size or 32
    if p.o.per_rank_batch:
        return batch * p.size
    if batch < p.size:
        raise ValueError(
            f"concord: batch_size {batch} is smaller than the number of ranks ({p.size}): "
            "batch_size is the global batch, split over the ranks, and every rank needs at "
            f"least one sample of every batch. Use batch_size >= {p.size}, fewer ranks, "
            "or --per-rank-batch.")
    if batch % p.size:
        p.say_once("batch", f"batch_size {batch} is not a multiple of {p.size} "
                            "ranks: ranks get batches differing by one sample")
    return batch


def shuffle_seed(p):
    """A seed for one fit()'s shuffle, the same on every rank: each rank draws
    one from numpy's global generator (so the ranks' generators stay in step,
    and a script's keras.utils.set_random_seed makes runs repeatable), and
    rank 0's is taken."""
    import numpy as np
    return from_rank0(np.random.randint(0, 2**31 - 1), "concord.run/shuffle-seed")


def share(length, rank, size):
    """Rank `rank`'s part of a batch of `length` samples, as a slice."""
    return slice(rank % max(length, 1), None, size)


def epoch_order(n, seed, epoch):
    """The order of n samples in one epoch: as they are (seed None), else a
    permutation that depends on the seed and the epoch only, so that every
    rank draws the same one."""
    import numpy as np
    if seed is None:
        return np.arange(n)
    return np.random.default_rng([int(seed), int(epoch)]).permutation(n)


def rank_batch(order, step, batch, rank, size):
    """The sample indices rank `rank` takes in batch `step` of an epoch in `order`."""
    indices = order[step * batch:(step + 1) * batch]
    return indices[share(len(indices), rank, size)]
