"""numpy inputs of fit/evaluate as the transparent mode reads them, whatever
Keras's backend: which inputs are arrays (also lists, tuples and dicts of
them), Keras's validation_split on them, and their cast to Keras's floatx.
Structures are walked with keras.tree, which every backend has."""
from __future__ import annotations

import math


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
    import keras
    import numpy as np
    if s is None:
        return False
    leaves = keras.tree.flatten(as_tuples(s))
    return bool(leaves) and all(isinstance(a, np.ndarray) and a.ndim >= 1 for a in leaves)


def numpy_inputs(x, y, sample_weight):
    """Whether fit/evaluate's (x, y, sample_weight) are arrays that can be sharded."""
    if not _is_numpy_like(x):
        return False
    if y is None:
        return sample_weight is None  # (x, sample_weight) has no dataset form
    return _is_numpy_like(y) and (sample_weight is None or _is_numpy_like(sample_weight))


def num_samples(x):
    import keras
    return len(keras.tree.flatten(as_tuples(x))[0])


def split_arrays(arrays, validation_split):
    """Keras's validation_split on arrays: the last fraction, before shuffling
    (keras.src.trainers.data_adapters.array_slicing.train_validation_split)."""
    import keras
    n = num_samples(arrays[0])
    split_at = int(math.floor(n * (1.0 - validation_split)))
    if split_at == 0 or split_at == n:
        raise ValueError(
            f"Training data contains {n} samples, which is not sufficient to split it into a "
            f"validation and training set as specified by `validation_split={validation_split}`. "
            "Either provide more data, or a different value for the `validation_split` argument.")

    def part(a, b):
        return tuple(None if s is None else keras.tree.map_structure(lambda t: t[a:b],
                                                                      as_tuples(s))
                     for s in arrays)

    return part(0, split_at), part(split_at, n)


def floatx(s):
    """Floating arrays in Keras's floatx, as Keras's own array adapter casts them."""
    import keras
    import numpy as np
    dtype = np.dtype(keras.backend.floatx())
    if s is None:
        return None
    return keras.tree.map_structure(
        lambda a: a.astype(dtype) if np.issubdtype(a.dtype, np.floating) and a.dtype != dtype
        else a, s)
