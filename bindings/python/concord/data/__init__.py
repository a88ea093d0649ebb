"""concord.data: readers that read only this rank's share of a data set.

    r = concord.data.open("train.csv", label="species")
    x, y = r.read()                      # this rank's samples (numpy)
    ds = r.as_dataset(128, shuffle=True) # or a tf.data dataset of them

Formats: CSV/TSV (a file, a directory or a glob), .npy, .npz, IDX (MNIST's,
gzipped or not) and HDF5. The sharding rule is the transparent mode's
(strided, see _shard.py); bad input raises DataError on every rank. See
docs/DATA.md.
"""
from __future__ import annotations

import glob as _glob
import os
from typing import Optional, Sequence, Union

import numpy as np

from . import _shard
from ._agree import DataError, agreed, gather_ints, rank_size
from ._csv import CsvSource
from ._tf import ShardArray, fit_inputs, is_sharded, validation_inputs
from . import _tf

__all__ = ["open", "Reader", "DataError", "ShardArray", "is_sharded", "FORMATS",
           "fit_inputs", "validation_inputs"]

FORMATS = ("csv", "tsv", "npy", "npz", "idx", "hdf5")
_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".npy": "npy", ".npz": "npz", ".idx": "idx",
               ".h5": "hdf5", ".hdf5": "hdf5", ".hdf": "hdf5", ".he5": "hdf5"}


def _format_of(path: str) -> Optional[str]:
    base = path[:-3] if path.endswith(".gz") else path
    ext = os.path.splitext(base)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if base.endswith("ubyte") or "-idx" in os.path.basename(base):
        return "idx"
    return None


def _files(path_or_pattern: str, fmt: Optional[str]):
    """The files a path, directory (its files of one format) or glob names (sorted)."""
    p = os.fspath(path_or_pattern)
    if os.path.isdir(p):
        # Hidden files are skipped, as a glob's "*" skips them: macOS's "._part0.csv"
        # (AppleDouble metadata on copied volumes) was read as the first CSV file.
        files = sorted(os.path.join(p, f) for f in os.listdir(p)
                       if not f.startswith(".") and os.path.isfile(os.path.join(p, f))
                       and _format_of(f)
                       and (fmt is None or _format_of(f) == fmt))
        if not files:
            raise DataError(f"{p}: the directory holds no {fmt or 'data'} file")
        kinds = sorted({_format_of(f) for f in files})
        if len(kinds) > 1:
            raise DataError(f"{p}: the directory holds files of several formats "
                            f"({', '.join(kinds)}); give format=")
        return files
    if os.path.exists(p):
        return [p]
    files = sorted(f for f in _glob.glob(p) if os.path.isfile(f))
    if not files:
        raise DataError(f"{p}: no file matches" if _glob.has_magic(p) else f"{p}: no such file")
    return files


def _sibling(path: str, other: str) -> str:
    """A label file named by a relative path: next to the features file, as
    documented, else relative to the working directory. Where both exist and
    differ it is an error: the working directory's file was taken before,
    silently pairing the features with another data set's labels."""
    other = os.fspath(other)
    beside = os.path.join(os.path.dirname(path), other)
    if os.path.isabs(other) or not os.path.exists(beside):
        return other
    if os.path.exists(other) and not os.path.samefile(other, beside):
        raise DataError(f"{path}: label={other!r} names both {beside} (next to the features "
                        f"file) and {os.path.abspath(other)} (in the working directory); give "
                        "a path that names one")
    return beside


class _Pair:
    """Features and labels from two same-length record sources."""

    def __init__(self, features, labels):
        self.features, self.labels = features, labels
        if labels is not None and labels.total != features.total:
            raise DataError(f"mismatched sample counts: {features.name} holds {features.total} "
                            f"samples, {labels.name} {labels.total}")
        self.total, self.name = features.total, features.name

    def read(self, indices):
        x = self.features.read(indices)
        return x, None if self.labels is None else self.labels.read(indices)


def _keyed(path, keys, features, label, kind):
    """The feature and label array names of an .npz/HDF5 file."""
    for name in (features, label):
        if name is not None and name not in keys:
            raise DataError(f"{path}: no {kind} named {name!r} (it holds "
                            f"{', '.join(keys) or 'none'})")
    if features is None:
        rest = [k for k in keys if k != label]
        if len(rest) != 1:
            raise DataError(f"{path}: name the features {kind} (features=...): it holds "
                            f"{', '.join(keys) or 'none'}")
        features = rest[0]
    return features, label


def _source(fmt, files, features, label, delimiter, header, dtype):
    from . import _records
    path = files[0]
    if fmt not in ("csv", "tsv") and len(files) > 1:
        raise DataError(f"{fmt} readers take one file; {len(files)} match ({path}, ...)")
    if fmt != "idx":  # read as they are: a gzipped one failed with a message naming no file
        gzipped = [f for f in files if _records.is_gzip(f)]
        if gzipped:
            raise DataError(f"{gzipped[0]}: gzip-compressed; only IDX files are read compressed "
                            f"(decompress it first)")
    if fmt in ("csv", "tsv"):
        delimiter = delimiter or ("\t" if fmt == "tsv" else ",")
        return CsvSource(files, delimiter, header, label, features, dtype or np.float32)
    if fmt == "npy":
        labels = None if label is None else _records.NpyFile(_sibling(path, label))
        return _Pair(_records.NpyFile(path), labels)
    if fmt == "idx":
        labels = None if label is None else _records.idx_file(_sibling(path, label))
        return _Pair(_records.idx_file(path), labels)
    if fmt == "npz":
        f, lab = _keyed(path, _records.npz_keys(path), features, label, "array")
        return _Pair(_records.npz_member(path, f),
                     None if lab is None else _records.npz_member(path, lab))
    if fmt == "hdf5":
        from ._hdf5 import Hdf5Dataset, dataset_names
        # h5py names "/train/x" and "train/x" alike (from the root); the listing has the
        # latter, so the absolute form was refused ("no dataset named '/train/x'").
        features, label = (n.lstrip("/") if isinstance(n, str) else n for n in (features, label))
        f, lab = _keyed(path, dataset_names(path), features, label, "dataset")
        return _Pair(Hdf5Dataset(path, f), None if lab is None else Hdf5Dataset(path, lab))
    raise DataError(f"{path}: unknown format {fmt!r}; formats: {', '.join(FORMATS)}")


class Reader:
    """This rank's share of one data set. len(r) is this rank's sample count,
    r.total the data set's, r.indices the global indices this rank holds, in
    the order read() returns them."""

    def __init__(self, source, shard: str, limit: Optional[int] = None):
        self._source = source
        self.rank, self.size = rank_size()
        self.shard = shard
        self.total = int(source.total if limit is None else min(source.total, limit))
        self.name = source.name
        self._check_totals()
        self.indices = _shard.share(self.total, self.rank, self.size, shard)
        self._data = None

    def _check_totals(self):
        """Every rank must see the same data set: with node-local copies of
        different lengths (20 and 24 samples), the shares overlapped or missed
        samples and as_dataset() gave 5 steps an epoch on one rank and 6 on the
        other, whose last step then waited for ever."""
        totals = gather_ints([self.total], "total")[:, 0]
        if (totals != self.total).any():
            seen = ", ".join(f"rank {r}: {int(t)}" for r, t in enumerate(totals))
            raise DataError(f"{self.name}: the ranks see data sets of different sizes ({seen} "
                            "samples); every rank must read the same data set")

    def __len__(self) -> int:
        return len(self.indices)

    def __repr__(self):
        return (f"<concord.data.Reader {self.name}: {len(self)} of {self.total} samples on rank "
                f"{self.rank} of {self.size}, {self.shard}>")

    def read(self):
        """(x, y): this rank's samples (ShardArray, a numpy array), y None
        without labels. Read once; later calls return the same arrays. Every
        rank must call it (errors are agreed)."""
        if self._data is None:
            x, y = agreed(lambda: self._source.read(self.indices))
            if isinstance(self._source, CsvSource) and y is not None:
                # Whole numbers that float64 holds exactly (|y| <= 2**53) become int64;
                # 1e20 was cast to int64's minimum (a RuntimeWarning only).
                integral = bool(np.all((np.mod(y, 1) == 0) & (np.abs(y) <= 2.0**53)))
                if gather_ints([integral], "label-type").min():
                    y = y.astype(np.int64)
                else:
                    y = y.astype(np.float32)
            self._data = (_tf.mark(x), _tf.mark(y))
        return self._data

    @property
    def rows(self):
        """(full, all): the rows every rank holds and the rows any rank holds."""
        return self.total // self.size, -(-self.total // self.size)

    def epoch_indices(self, epoch: int, batch_size: int, seed=None):
        """The global indices of this rank's batches in `epoch` (a list of
        arrays), as as_dataset() yields them with this seed (None: in order)."""
        full, rows = self.rows
        b = _tf.per_rank_batch(batch_size, self.size)
        return [self.indices[p] for p in _shard.batches(len(self), full, rows, b, seed, epoch)]

    def as_dataset(self, batch_size: int, shuffle: bool = True, seed=None):
        """A tf.data dataset of this rank's batches: batch_size is the global
        batch (each rank takes batch_size // N samples of it, as the transparent
        mode does); with shuffle a new order every epoch, the same on every
        rank: rank 0's seed (given, or drawn from numpy's global generator).
        Elements are (x, y), or (x,) without labels."""
        x, y = self.read()
        seed = _tf.common_seed(seed) if shuffle else None
        full, rows = self.rows
        arrays = (np.asarray(x),) if y is None else (np.asarray(x), np.asarray(y))
        return _tf.dataset(arrays, len(self), full, rows, _tf.per_rank_batch(batch_size, self.size),
                           seed)


def open(path_or_pattern, format: Optional[str] = None,  # noqa: A001 - concord.data.open
         features: Union[None, str, int, Sequence] = None, label=None, *,
         shard: str = "strided", delimiter: Optional[str] = None, header: Optional[bool] = None,
         dtype=None, limit: Optional[int] = None) -> Reader:
    """Opens a data set for reading this rank's share (every rank must call it).

    format: "csv", "tsv", "npy", "npz", "idx" or "hdf5"; from the extension
      when None (files named *-ubyte[.gz] are IDX).
    label: CSV/TSV: the label column's name (header) or index; .npz/HDF5: the
      label array's/dataset's name; .npy/IDX: the label file (a relative path
      next to the features file, else in the working directory; an error where
      both hold one). None: no labels.
    features: CSV/TSV: the feature columns (names or indices; default all but
      the label); .npz/HDF5: the features array/dataset (default the only other).
    shard: "strided" (rank r holds samples r, r+N, ...: the transparent mode's
      rule) or "contiguous" (one block a rank, the remainder to the lowest ranks).
    delimiter, header (None: a first line with a field, empty ones aside, that
      is not a number is a header),
      dtype (CSV features; default float32) apply to CSV/TSV.
    limit: the data set is the first `limit` samples (None: all).
    """
    _shard.check_mode(shard)
    if limit is not None and limit < 0:
        raise ValueError(f"concord.data: limit must be >= 0, not {limit}")

    def open_source():
        files = _files(path_or_pattern, format)
        fmt = format or _format_of(files[0])
        kinds = sorted({_format_of(f) or "unknown" for f in files})
        if format is None and len(kinds) > 1:  # a glob: the directory's check (_files)
            raise DataError(f"{path_or_pattern}: matches files of several formats "
                            f"({', '.join(kinds)}): {files[0]}'s reader would read them all; "
                            "give format= or a narrower pattern")
        if fmt is None:
            raise DataError(f"{files[0]}: unknown format (give format=, one of "
                            f"{', '.join(FORMATS)})")
        text_only = [n for n, v in (("delimiter", delimiter), ("header", header),
                                    ("dtype", dtype)) if v is not None]
        if fmt not in ("csv", "tsv") and text_only:
            raise DataError(f"{files[0]}: {', '.join(text_only)} apply to CSV/TSV only, not "
                            f"{fmt} (cast after read())")
        return _source(fmt, files, features, label, delimiter, header, dtype)

    return Reader(agreed(open_source), shard, limit)
