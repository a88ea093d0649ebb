"""fit()/evaluate() inputs on Keras's torch backend, sharded over ranks by
concord.transparent.batches's rule (the global batch split by stride): numpy
arrays become a PyDataset of this rank's share of every global batch (a new
order every epoch when shuffled, the same on every rank); the batches of a
torch DataLoader or a keras.utils.PyDataset are cut to this rank's share (a
PyDataset's batches shuffled alike on every rank; a DataLoader shuffles
itself).
Other inputs are refused, naming what to use instead. p is the Patcher."""
from __future__ import annotations

import keras
import torch

from concord.transparent.arrays import (
    as_tuples, floatx, num_samples, numpy_inputs, split_arrays)
from concord.transparent.batches import (
    epoch_order, global_batch, rank_batch, share, shuffle_seed)

_USE = ("numpy arrays (also lists, tuples and dicts of them), a torch.utils.data.DataLoader "
        "or a keras.utils.PyDataset")


def _strided(batch, rank, size):
    """This rank's share of one batch (a structure of arrays or tensors)."""
    leaves = [t for t in keras.tree.flatten(batch) if t is not None]
    part = share(len(leaves[0]), rank, size)
    return keras.tree.map_structure(lambda t: None if t is None else t[part], batch)


class ArrayShare(keras.utils.PyDataset):
    """This rank's share of every global batch of numpy arrays `parts` ((x,),
    (x, y) or (x, y, sample_weight)), in a new order every epoch when seeded."""

    def __init__(self, parts, batch, rank, size, seed):
        super().__init__()
        self._parts, self._batch, self._rank, self._size = parts, batch, rank, size
        self._samples, self._seed, self._epochs = num_samples(parts[0]), seed, 0
        self._order = epoch_order(self._samples, seed, 0)

    def __len__(self):
        return -(-self._samples // self._batch)

    def on_epoch_begin(self):
        # Keras also begins an "epoch" to peek at the first batch; every rank
        # does alike, so the ranks still agree on each epoch's order.
        self._order = epoch_order(self._samples, self._seed, self._epochs)
        self._epochs += 1

    def __getitem__(self, step):
        mine = rank_batch(self._order, step, self._batch, self._rank, self._size)
        return keras.tree.map_structure(lambda a: a[mine], self._parts)


class PyDatasetShare(keras.utils.PyDataset):
    """A PyDataset's batches, each cut to this rank's share; in a new order
    every epoch when seeded (Keras's own shuffle of a PyDataset's batches
    draws from each process's Python generator, which the ranks need not
    share)."""

    def __init__(self, inner, rank, size, seed):
        super().__init__(workers=inner.workers, use_multiprocessing=inner.use_multiprocessing,
                         max_queue_size=inner.max_queue_size)
        self._inner, self._rank, self._size = inner, rank, size
        self._seed = seed if inner.num_batches is not None else None
        self._epochs, self._order = 0, None

    @property
    def num_batches(self):
        return self._inner.num_batches

    def __len__(self):
        return len(self._inner)

    def __getitem__(self, index):
        if self._order is not None:
            index = int(self._order[index])
        return _strided(self._inner[index], self._rank, self._size)

    def on_epoch_begin(self):
        if self._seed is not None:
            self._order = epoch_order(self._inner.num_batches, self._seed, self._epochs)
            self._epochs += 1
        self._inner.on_epoch_begin()

    def on_epoch_end(self):
        self._inner.on_epoch_end()


class _LoaderShare(torch.utils.data.IterableDataset):
    """A DataLoader's batches, each cut to this rank's share."""

    def __init__(self, loader, rank, size):
        self._loader, self._rank, self._size = loader, rank, size

    def __iter__(self):
        for batch in self._loader:
            yield _strided(batch, self._rank, self._size)


class _SizedLoaderShare(_LoaderShare):
    def __len__(self):
        return len(self._loader)


def _loader_share(p, loader):
    if loader.batch_size is not None and loader.batch_size < p.size:
        raise ValueError(
            f"concord: the DataLoader's batches hold {loader.batch_size} samples, fewer than "
            f"the number of ranks ({p.size}): the batch is the global batch, split over the "
            f"ranks, and every rank needs at least one sample of it. Batch by {p.size} or more.")
    try:
        len(loader)
        shares = _SizedLoaderShare(loader, p.rank, p.size)
    except TypeError:  # an IterableDataset without a length
        shares = _LoaderShare(loader, p.rank, p.size)
    return torch.utils.data.DataLoader(shares, batch_size=None)  # batches as they come


def _why_not(x):
    """Why concordrun cannot shard x, and what to do."""
    from concord import data
    if data.is_sharded(x):
        return ("arrays from a concord.data reader hold each rank's share already, and the torch "
                "backend cannot take them yet: pass the arrays themselves")
    if isinstance(x, torch.Tensor):
        return "a torch.Tensor is not sharded: pass it as a numpy array (x.cpu().numpy())"
    if numpy_inputs(x, None, None):
        return ("y and sample_weight must be numpy arrays as well (and sample_weight comes "
                "with y)")
    return f"a {type(x).__module__}.{type(x).__qualname__} cannot be split over the ranks"


def _refuse(x, role):
    raise TypeError(f"concord: {role} on Keras's torch backend: {_why_not(x)}. concordrun "
                    f"shards {_USE}; or run the script as it is with concordrun --no-tensorflow "
                    "and shard the data yourself.")


def shard(p, x, y, sample_weight, batch_size, shuffle, role):
    """This rank's share of fit/evaluate's (x, y, sample_weight), as one input
    that Keras takes with y, sample_weight and batch_size None and shuffle
    False. role names the argument in errors."""
    from concord import data
    # Any of them a reader's share (np.asarray(x) drops the mark of x alone):
    # refused, as sharding it again would silently drop samples.
    read = next((a for a in (x, y, sample_weight) if a is not None and data.is_sharded(a)), None)
    if read is not None:
        _refuse(read, role)
    if numpy_inputs(x, y, sample_weight):
        parts = tuple(floatx(as_tuples(s)) for s in (x, y, sample_weight) if s is not None)
        seed = shuffle_seed(p) if shuffle else None
        return ArrayShare(parts, global_batch(p, batch_size), p.rank, p.size, seed)
    if isinstance(x, torch.utils.data.DataLoader):
        return _loader_share(p, x)
    if isinstance(x, keras.utils.PyDataset):
        return PyDatasetShare(x, p.rank, p.size, shuffle_seed(p) if shuffle else None)
    _refuse(x, role)


def shard_fit(p, x, y, sample_weight, batch_size, shuffle, validation_split,
              validation_data, kwargs):
    """fit()'s training and validation inputs, sharded: (x, validation_data);
    kwargs loses validation_batch_size (the validation share is batched)."""
    vbatch = kwargs.pop("validation_batch_size", None) or batch_size
    if validation_split and validation_data is None:
        if not numpy_inputs(x, y, sample_weight):
            raise ValueError("concord: validation_split takes numpy arrays (as Keras's own "
                             "does); pass validation_data instead")
        (x, y, sample_weight), validation_data = split_arrays((x, y, sample_weight),
                                                              validation_split)
    x = shard(p, x, y, sample_weight, batch_size, shuffle, "fit()'s x")
    if validation_data is not None:
        if isinstance(validation_data, (tuple, list)) and 1 <= len(validation_data) <= 3:
            vx, vy, vw = (tuple(validation_data) + (None, None))[:3]
        else:
            vx, vy, vw = validation_data, None, None
        validation_data = shard(p, vx, vy, vw, vbatch, False, "fit()'s validation_data")
    return x, validation_data
