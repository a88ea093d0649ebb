"""CSV/TSV files (one sample a line, no line breaks inside fields). Text cannot
be seeked by sample, so every rank reads the files sequentially, parses only
the lines of its share and keeps only those. Blank lines are skipped."""
from __future__ import annotations

from typing import List, Optional, Sequence, Union

import numpy as np

from ._agree import DataError

_CHUNK_BYTES = 4 << 20  # text parsed at a time (bounds the text and float64 scratch)


def _text(line: bytes, where: str) -> str:
    try:
        return line.decode()
    except UnicodeDecodeError as e:  # its message names no file or line
        raise DataError(f"{where}: not UTF-8 text ({e})") from None


def _fields(line: bytes, delimiter: str, where: str) -> List[str]:
    return [f.strip().strip('"') for f in _text(line, where).rstrip("\r\n").split(delimiter)]


def _is_number(text: str) -> bool:
    """Whether np.loadtxt, which parses the data, reads `text` as a number:
    float() alone also takes "1_000" and non-ASCII digits, which loadtxt
    refuses, and its error then named only its row within a chunk."""
    try:
        float(text)
        return np.loadtxt([text], dtype=np.float64, comments=None).size == 1
    except ValueError:
        return False


_BOM = b"\xef\xbb\xbf"


def _lines(f):
    """(number, line) of a file's lines, the first without a UTF-8 byte-order mark:
    Excel's "CSV UTF-8" starts with one, and a numeric first line that kept it
    was taken for a header (its sample silently lost), a header's first name
    could not be named (label="a" against "\ufeffa")."""
    for number, line in enumerate(f, 1):
        yield number, line[len(_BOM):] if number == 1 and line.startswith(_BOM) else line


def _looks_like_header(fields: List[str]) -> bool:
    """A first line is a header when a field that is not empty is not a number
    (pandas writes an empty name over its index column: ",a,b"), or when every
    field is empty. A data line with a missing value ("1,,0") was taken for a
    header, its sample lost without an error; it now reads as data, and its
    empty field is then reported as not a number."""
    named = [v for v in fields if v]
    return not named or not all(_is_number(v) for v in named)


def _first_line(path: str):
    with open(path, "rb") as f:
        for number, line in _lines(f):
            if line.strip():
                return number, line
    return None, None


class CsvSource:
    def __init__(self, files: Sequence[str], delimiter: str, header: Optional[bool],
                 label: Union[None, int, str], features, dtype):
        self.files, self.delimiter, self.dtype = list(files), delimiter, np.dtype(dtype)
        number, line = _first_line(self.files[0])
        if line is None:
            raise DataError(f"{self.files[0]}: empty file (no header, no data)")
        first = _fields(line, delimiter, f"{self.files[0]}:{number}")
        self.header = _looks_like_header(first) if header is None else header
        self.columns = first if self.header else [str(i) for i in range(len(first))]
        self.label = None if label is None else self._column(label, "label")
        if features is None:
            self.features = [i for i in range(len(self.columns)) if i != self.label]
        else:
            self.features = [self._column(c, "feature") for c in (
                features if isinstance(features, (list, tuple)) else [features])]
        if not self.features:
            raise DataError(f"{self.files[0]}: no feature columns")
        self.counts = [self._count(p) for p in self.files]
        self.total = sum(self.counts)
        self.name = self.files[0] if len(self.files) == 1 else \
            f"{len(self.files)} files ({self.files[0]}, ...)"

    def _column(self, c, what) -> int:
        if isinstance(c, (int, np.integer)) and not isinstance(c, bool):
            if not -len(self.columns) <= c < len(self.columns):
                raise DataError(f"{self.files[0]}: {what} column {c} does not exist (there are "
                                f"{len(self.columns)} columns)")
            return int(c) % len(self.columns)
        if not self.header:
            raise DataError(f"{self.files[0]}: {what} column {c!r} named, but the file has no "
                            "header; give its index")
        if c not in self.columns:
            raise DataError(f"{self.files[0]}: no column named {c!r} (the header has "
                            f"{', '.join(self.columns)})")
        return self.columns.index(c)

    def _data_lines(self, path):
        """(line number, line) of every data line of `path`."""
        with open(path, "rb") as f:
            seen_header = not self.header
            for number, line in _lines(f):
                if not line.strip():
                    continue
                if not seen_header:
                    seen_header = True
                    if _fields(line, self.delimiter, f"{path}:{number}") != self.columns:
                        raise DataError(f"{path}:{number}: the header differs from "
                                        f"{self.files[0]}'s")
                    continue
                yield number, line

    def _count(self, path) -> int:
        return sum(1 for _ in self._data_lines(path))

    def read(self, indices: np.ndarray):
        wanted = np.zeros(self.total, bool)
        wanted[indices] = True
        x = np.empty((len(indices), len(self.features)), self.dtype)
        y = None if self.label is None else np.empty(len(indices), np.float64)
        ncols, done, g = len(self.columns), 0, 0
        pending, pending_bytes, sep = [], 0, self.delimiter.encode()
        for path in self.files:
            for number, line in self._data_lines(path):
                if wanted[g]:
                    if line.count(sep) + 1 != ncols:
                        raise DataError(f"{path}:{number}: {line.count(sep) + 1} fields, "
                                        f"expected {ncols} (a ragged row)")
                    pending.append((path, number, line))
                    pending_bytes += len(line)
                    if pending_bytes >= _CHUNK_BYTES:
                        done = self._parse(pending, x, y, done)
                        pending, pending_bytes = [], 0
                g += 1
        self._parse(pending, x, y, done)
        return x, y

    def _parse(self, lines, x, y, done):
        if not lines:
            return done
        try:
            # comments=None: loadtxt's default '#' dropped a line starting with '#' (or cut a
            # line at a '#'), and the fewer rows it returned were broadcast over the share's
            # rows (one sample copied in place of another). '#' is now a value like any other,
            # and not a number.
            values = np.loadtxt([ln.decode() for _, _, ln in lines], delimiter=self.delimiter,
                                dtype=np.float64, ndmin=2, quotechar='"', comments=None)
        except ValueError:  # UnicodeDecodeError too: _explain names the file and line
            self._explain(lines)
            raise
        if values.shape[0] != len(lines):  # a row per line, never broadcast
            raise ValueError(f"{lines[0][0]}:{lines[0][1]}: {len(lines)} lines parsed as "
                             f"{values.shape[0]} rows")
        x[done:done + len(lines)] = values[:, self.features]
        if y is not None:
            y[done:done + len(lines)] = values[:, self.label]
        return done + len(lines)

    def _explain(self, lines):
        for path, number, line in lines:
            for i, v in enumerate(_fields(line, self.delimiter, f"{path}:{number}")):
                if not _is_number(v):
                    raise DataError(f"{path}:{number}: {v!r} in column {self.columns[i]!r} is "
                                    "not a number")
