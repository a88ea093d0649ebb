"""Ranks agree on failures: a reader step runs on every rank, then every rank
learns whether any failed and raises the same error (the first failing rank's
message), so no rank goes on to a collective the others never reach."""
from __future__ import annotations

import itertools
import zipfile
import zlib
from typing import Callable, TypeVar

import numpy as np

T = TypeVar("T")
_names = itertools.count()


class DataError(ValueError):
    """Bad input to a concord.data reader (raised alike on every rank)."""


def rank_size():
    import concord
    return concord.rank(), concord.size()


def _allgather(values: np.ndarray, what: str) -> np.ndarray:
    import concord
    return concord.allgather(values, name=f"concord.data/{what}#{next(_names)}")


def gather_ints(values, what: str) -> np.ndarray:
    """Every rank's `values` (the same count on each), one row per rank."""
    mine = np.asarray(values, dtype=np.int64).reshape(1, -1)
    if rank_size()[1] == 1:
        return mine
    return _allgather(mine, what)


def _first_error(message: str) -> str:
    """The first failing rank's message ("" when none failed), on every rank."""
    data = np.frombuffer(message.encode(), dtype=np.uint8)
    lengths = gather_ints([data.size], "error-length")[:, 0]
    failed = np.nonzero(lengths)[0]
    if failed.size == 0:
        return ""
    padded = np.zeros(int(lengths.max()), np.uint8)  # allgather needs equal rows
    padded[:data.size] = data
    rows = _allgather(padded.reshape(1, -1), "error-text")
    first = int(failed[0])
    text = bytes(rows[first, :lengths[first]]).decode(errors="replace")
    return text if rank_size()[1] == 1 else f"{text} (on rank {first})"


# What bad input raises: zlib.error (a corrupt deflate stream in a gzip file or an
# .npz member) and zipfile.BadZipFile (a bad CRC, found by the rank that reads a
# member to its end) derive from Exception alone, not OSError or ValueError.
_BAD_INPUT = (DataError, OSError, ValueError, KeyError, EOFError, zlib.error,
              zipfile.BadZipFile)


def agreed(step: Callable[[], T]) -> T:
    """step() on every rank; if it fails on any rank with bad input (DataError,
    OSError, ValueError, KeyError, EOFError, zlib.error, BadZipFile), every rank
    raises a DataError with the first failing rank's message. Any other failure
    is agreed on too, so that no rank is left waiting in a later collective for
    one that failed: the failing rank re-raises its own exception, the others a
    DataError naming its type and rank."""
    result, message, error = None, "", None
    try:
        result = step()
    except Exception as e:  # noqa: BLE001 - every failure is agreed on, then raised
        error = e
        message = str(e) or type(e).__name__
        if not isinstance(e, _BAD_INPUT):
            message = f"{type(e).__name__}: {message}"
    if rank_size()[1] == 1:
        if error is None:
            return result
        if isinstance(error, DataError) or not isinstance(error, _BAD_INPUT):
            raise error
        raise DataError(message) from error
    first = _first_error(message)
    if first:
        if error is not None and not isinstance(error, _BAD_INPUT):
            raise error
        raise DataError(first) from error
    return result
