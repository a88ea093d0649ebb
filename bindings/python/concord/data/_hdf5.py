"""HDF5 datasets (h5py): a rank reads its share as hyperslabs (a block, or a
strided selection), so only its own samples leave the file."""
from __future__ import annotations

from typing import List

import numpy as np

from ._agree import DataError
from ._records import WINDOW_BYTES, gather_rows

STRIDED_MIN_BYTES = 64 << 10


def _h5py():
    try:
        import h5py
    except ImportError:
        raise DataError("concord.data: HDF5 files need h5py (pip install h5py)") from None
    return h5py


def _open(path: str):
    h5py = _h5py()
    try:
        return h5py.File(path, "r")
    except OSError as e:  # h5py's message names no file: "file signature not found"
        raise DataError(f"{path}: not a readable HDF5 file ({e})") from None


def dataset_names(path: str) -> List[str]:
    h5py = _h5py()
    names = []
    with _open(path) as f:
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    return names


class Hdf5Dataset:
    def __init__(self, path: str, key: str):
        h5py = _h5py()
        self.path, self.key, self.name = path, key, f"{path}[{key}]"
        with _open(path) as f:
            if key not in f or not isinstance(f[key], h5py.Dataset):
                raise DataError(f"{path}: no dataset named {key!r} (it holds "
                                f"{', '.join(dataset_names(path)) or 'none'})")
            d = f[key]
            if d.ndim == 0:
                raise DataError(f"{self.name}: a scalar dataset has no samples")
            self.total, self.shape, self.dtype = d.shape[0], tuple(d.shape[1:]), d.dtype

    def read(self, indices: np.ndarray) -> np.ndarray:
        """Hyperslab reads: a block share in block windows; a strided share of
        large samples (>= 64 KiB) as strided hyperslabs (start:stop:step), which
        read only its samples; of small samples as block windows it picks from
        (HDF5's strided selections cost per element, and small samples share
        their chunks with the other ranks' anyway)."""
        h5py = _h5py()
        out = np.empty((len(indices),) + self.shape, self.dtype.newbyteorder("="))
        if len(indices) == 0:
            return out
        step = int(indices[1] - indices[0]) if len(indices) > 1 else 1
        if step < 1 or not np.array_equal(indices, indices[0] + step * np.arange(len(indices))):
            raise ValueError("concord.data: HDF5 shares are blocks or strided")  # by construction
        record = max(1, out.itemsize * int(np.prod(self.shape, dtype=np.int64)))
        with h5py.File(self.path, "r") as f:
            d = f[self.key]
            if step == 1 or record < STRIDED_MIN_BYTES:
                return gather_rows(indices, self.total, record, out, lambda lo, hi: d[lo:hi])
            per = max(1, WINDOW_BYTES // record)
            for k in range(0, len(indices), per):
                m = min(per, len(indices) - k)
                first = int(indices[k])
                d.read_direct(out, np.s_[first:first + step * (m - 1) + 1:step], np.s_[k:k + m])
        return out
