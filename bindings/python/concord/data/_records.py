"""Files of fixed-size records (.npy, .npz members, IDX): a rank reads the
records it holds window by window, so its memory is its share plus one window
(16 MiB), never the file."""
from __future__ import annotations

import contextlib
import gzip
import math
import os
import zipfile
import zlib
from typing import Callable, Tuple

import numpy as np

from ._agree import DataError

WINDOW_BYTES = 16 << 20


def gather_rows(indices: np.ndarray, total: int, record_bytes: int, out: np.ndarray,
                window: Callable[[int, int], np.ndarray]) -> np.ndarray:
    """out[k] = record indices[k] (ascending), reading window(lo, hi) (records
    lo..hi-1 as an array) over as few records as cover them."""
    per_window = max(1, WINDOW_BYTES // max(1, record_bytes))
    k = 0
    while k < len(indices):
        lo = int(indices[k])
        hi = min(total, lo + per_window, int(indices[-1]) + 1)
        stop = int(np.searchsorted(indices, hi, side="left"))
        block = window(lo, hi)
        if stop - k == hi - lo:  # every record of the window is wanted
            out[k:stop] = block
        elif block.dtype == out.dtype:  # no temporary copy of the picked records
            np.take(block, indices[k:stop] - lo, axis=0, out=out[k:stop])
        else:
            out[k:stop] = block[indices[k:stop] - lo]
        del block  # a memory-mapped window is unmapped here
        k = stop
    return out


class RecordFile:
    """One array of `total` records of `shape` and `dtype` in a file."""
    name: str
    total: int
    shape: Tuple[int, ...]
    dtype: np.dtype

    @property
    def record_bytes(self) -> int:
        return int(self.dtype.itemsize * math.prod(self.shape))

    def read(self, indices: np.ndarray) -> np.ndarray:
        out = np.empty((len(indices),) + self.shape, self.dtype.newbyteorder("="))
        return gather_rows(indices, self.total, self.record_bytes, out, self._window)

    def _window(self, lo: int, hi: int) -> np.ndarray:
        raise NotImplementedError


def check_complete(name, offset, record_bytes, total, size_bytes):
    complete = (size_bytes - offset) // max(1, record_bytes)
    if complete < total:
        raise DataError(
            f"{name}: truncated: the header declares {total} records of {record_bytes} bytes, "
            f"but record {complete} ends past the end of the file ({size_bytes} bytes)")


def _npy_header(f, name: str):
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    except ValueError as e:
        raise DataError(f"{name}: not a .npy array ({e})") from None
    if fortran and len(shape) > 1:
        raise DataError(f"{name}: Fortran-ordered arrays are not supported (save it C-ordered)")
    if dtype.hasobject:
        raise DataError(f"{name}: arrays of Python objects are not supported")
    if len(shape) == 0:
        raise DataError(f"{name}: a 0-d array has no samples")
    return shape, dtype


class StreamRecords(RecordFile):
    """Records read from a stream that seeks forward (a plain file, gzip, a zip
    member): windows are read in ascending order."""

    def __init__(self, name, opener, offset, shape, dtype, total, size_bytes=None):
        self.name, self._opener, self._offset = name, opener, offset
        self.total, self.shape, self.dtype = total, tuple(shape), dtype
        self._f = None
        if size_bytes is not None:  # an uncompressed file: truncation shows now
            check_complete(name, offset, self.record_bytes, total, size_bytes)

    def read(self, indices):
        with self._opener() as f:
            self._f = f
            try:
                return super().read(indices)
            except EOFError as e:
                raise DataError(f"{self.name}: the compressed stream is cut short ({e})") from None
            except (zlib.error, zipfile.BadZipFile) as e:  # derive from Exception alone
                raise DataError(f"{self.name}: the compressed data is corrupt ({e})") from None
            finally:
                self._f = None

    def _window(self, lo, hi):
        start = self._offset + lo * self.record_bytes
        if self._f.tell() != start:
            self._f.seek(start)
        want = (hi - lo) * self.record_bytes
        data = self._f.read(want)
        if len(data) < want:
            bad = lo + len(data) // max(1, self.record_bytes)
            raise DataError(f"{self.name}: truncated: record {bad} of {self.total} is incomplete "
                            f"(the data ends {len(data) + start - self._offset} bytes after "
                            "the header)")
        return np.frombuffer(data, self.dtype).reshape((hi - lo,) + self.shape)


class NpyFile(RecordFile):
    """A .npy file, memory-mapped one window at a time (each window unmapped
    before the next, so resident memory stays one window)."""

    def __init__(self, path):
        self.name = path
        with open(path, "rb") as f:
            shape, self.dtype = _npy_header(f, path)
            self._offset = f.tell()
        self.total, self.shape = shape[0], tuple(shape[1:])
        check_complete(path, self._offset, self.record_bytes, self.total, os.path.getsize(path))

    def _window(self, lo, hi):
        if hi == lo or self.record_bytes == 0:
            return np.empty((hi - lo,) + self.shape, self.dtype)
        return np.memmap(self.name, self.dtype, "r", self._offset + lo * self.record_bytes,
                         (hi - lo,) + self.shape)  # unmapped when the caller drops it


def npz_member(path: str, key: str) -> StreamRecords:
    names = npz_keys(path)
    if key not in names:
        raise DataError(f"{path}: no array named {key!r} (it holds {', '.join(names) or 'none'})")

    @contextlib.contextmanager
    def opener():
        with zipfile.ZipFile(path) as zf, zf.open(key + ".npy") as f:
            yield f

    with opener() as f:
        shape, dtype = _npy_header(f, f"{path}[{key}]")
        offset = f.tell()
    return StreamRecords(f"{path}[{key}]", opener, offset, shape[1:], dtype, shape[0])


def npz_keys(path: str):
    try:
        with zipfile.ZipFile(path) as zf:
            return [n[:-4] for n in zf.namelist() if n.endswith(".npy")]
    except zipfile.BadZipFile as e:  # its message names no file
        raise DataError(f"{path}: not an .npz file ({e})") from None


_IDX_TYPES = {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def idx_file(path: str) -> StreamRecords:
    """An IDX file (MNIST's format), gzipped or not."""
    gz = is_gzip(path)
    opener = (lambda: gzip.open(path, "rb")) if gz else (lambda: open(path, "rb"))
    with opener() as f:
        head = f.read(4)
        if len(head) < 4 or head[:2] != b"\0\0" or head[2] not in _IDX_TYPES or head[3] == 0:
            raise DataError(f"{path}: not an IDX file (bad magic number {head.hex() or 'none'})")
        ndim = head[3]
        raw = f.read(4 * ndim)
        if len(raw) < 4 * ndim:
            raise DataError(f"{path}: truncated: the IDX header ends early")
    dims = [int.from_bytes(raw[4 * i:4 * i + 4], "big") for i in range(ndim)]
    return StreamRecords(path, opener, 4 + 4 * ndim, dims[1:], np.dtype(_IDX_TYPES[head[2]]),
                         dims[0], None if gz else os.path.getsize(path))
