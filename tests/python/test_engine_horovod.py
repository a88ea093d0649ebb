"""The engine's alltoall, reducescatter and join through the Python binding,
against numpy references computed here from every rank's inputs."""
import numpy as np
import pytest

import concord
from concord import _concord


def rows_between(src, dst):
    return (src * 3 + dst * 2) % 4  # uneven, with zeros


def block(src, dst, row):
    n = rows_between(src, dst)
    return (np.arange(n * row, dtype=np.float64).reshape(n, row) + 100 * src + 10 * dst)


@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_alltoall_uneven(comm_info, dtype):
    rank, size = comm_info
    row = 3
    send = np.concatenate([block(rank, d, row) for d in range(size)]).astype(dtype)
    h = _concord.enqueue_alltoall(f"py/a2a/{dtype}", send.ctypes.data, send.size, dtype, row,
                                  [rows_between(rank, d) for d in range(size)])
    got = np.frombuffer(h.output(), dtype=dtype).reshape(-1, row)
    expected = np.concatenate([block(s, rank, row) for s in range(size)]).astype(dtype)
    np.testing.assert_array_equal(got, expected)
    assert h.first_dims() == [rows_between(s, rank) for s in range(size)]


def test_alltoall_bad_splits(comm_info):
    rank, size = comm_info
    x = np.zeros((size + 1, 2), np.float32)
    with pytest.raises(concord.Error, match="add up to"):
        _concord.enqueue_alltoall("py/a2a/bad", x.ctypes.data, x.size, "float32", 2, [1] * size)


@pytest.mark.parametrize("op", ["sum", "avg", "min", "max", "prod"])
def test_reducescatter_uneven_rows(comm_info, op):
    rank, size = comm_info
    rows, row = 2 * size + 1, 2
    inputs = [((np.arange(rows * row) * 5 + r * 3) % 7 - 3).astype(np.float64).reshape(rows, row)
              for r in range(size)]
    x = inputs[rank].copy()
    h = _concord.enqueue_reducescatter(f"py/rs/{op}", x.ctypes.data, x.size, "float64", row, op,
                                       2.0, 0.5)
    scaled = np.stack(inputs) * 2.0
    full = {"sum": scaled.sum(0), "avg": scaled.sum(0) / size, "min": scaled.min(0),
            "max": scaled.max(0), "prod": scaled.prod(0)}[op] * 0.5
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    got = np.frombuffer(h.output(), np.float64).reshape(-1, row)
    np.testing.assert_allclose(got, full[start:start + counts[rank]], rtol=1e-12)
    assert h.first_dims() == counts
    np.testing.assert_array_equal(x, inputs[rank])


def test_join_with_uneven_steps(comm_info):
    rank, size = comm_info
    n = 11

    def data(r, step):
        return np.full(n, float(r + 1 + 10 * step))

    for step in range(rank + 1):  # rank r runs r + 1 steps
        x = data(rank, step)
        _concord.enqueue_allreduce("py/join/grad", x.ctypes.data, n, "float64", "sum", 1.0,
                                   1.0).wait()
        expected = sum(data(r, step) for r in range(size) if r + 1 > step)
        np.testing.assert_array_equal(x, expected)
    last = np.frombuffer(_concord.enqueue_join().output(), np.int32)[0]
    assert last == size - 1
    y = np.ones(n)
    _concord.enqueue_allreduce("py/join/grad", y.ctypes.data, n, "float64", "sum", 1.0,
                               1.0).wait()
    np.testing.assert_array_equal(y, np.full(n, float(size)))
