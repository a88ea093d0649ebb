"""concord.allreduce and friends against numpy references computed here."""
import gc
import weakref

import numpy as np
import pytest

import concord

ml_dtypes = pytest.importorskip("ml_dtypes")

DTYPES = [np.int8, np.uint8, np.int32, np.int64, np.float16, ml_dtypes.bfloat16, np.float32,
          np.float64]
OPS = ["sum", "prod", "min", "max", "avg"]


def is_float(dtype):
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) == np.dtype(ml_dtypes.bfloat16)


def inputs(rank, n, dtype, op):
    """Values whose reduction is exact in every dtype, for any reduction order."""
    i = np.arange(n, dtype=np.int64)
    if op in ("sum", "avg"):
        v = (rank * 7 + i * 13) % 17 - (0 if np.dtype(dtype) == np.uint8 else 8)
    elif op == "prod":
        v = np.where((rank + i) % 3 == 0, 2, 1) * (1 if np.dtype(dtype) == np.uint8 else
                                                   np.where((rank + i) % 5 == 0, -1, 1))
    else:
        v = (rank * 31 + i * 17) % 101 - (0 if np.dtype(dtype) == np.uint8 else 50)
    return v.astype(np.float64).astype(dtype)


def reference(size, n, dtype, op):
    stack = np.stack([inputs(r, n, dtype, op).astype(np.float64) for r in range(size)])
    if op == "sum":
        return stack.sum(axis=0)
    if op == "avg":
        return stack.sum(axis=0) / size
    if op == "prod":
        return stack.prod(axis=0)
    return stack.min(axis=0) if op == "min" else stack.max(axis=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [0, 1, 7, 1023, 65537])
def test_every_dtype_and_op(comm_info, dtype, op, n):
    rank, size = comm_info
    if op == "avg" and not is_float(dtype):
        with pytest.raises(concord.Error) as err:
            concord.allreduce(inputs(rank, max(n, 1), dtype, op), op=op)
        assert err.value.code == "invalid argument"
        return
    x = inputs(rank, n, dtype, op)
    before = x.copy()
    got = concord.allreduce(x, op=op)
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(x, before)  # out of place leaves the input alone
    expected = reference(size, n, dtype, op)
    if op == "avg":
        tol = {np.dtype(np.float16): 1e-3, np.dtype(ml_dtypes.bfloat16): 1e-2}.get(
            np.dtype(dtype), 1e-6)
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got.astype(np.float64), expected)


@pytest.mark.parametrize("algorithm", [None, "ring", "recursive_doubling",
                                       "reduce_scatter_allgather", "hierarchical"])
def test_algorithms_and_shapes(comm_info, algorithm):
    rank, size = comm_info
    x = np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7) + rank
    got = concord.allreduce(x, algorithm=algorithm)
    expected = np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7) * size + sum(range(size))
    np.testing.assert_array_equal(got, expected)


def test_in_place_and_out(comm_info):
    rank, size = comm_info
    x = np.full(1001, rank + 1, dtype=np.float64)
    out = concord.allreduce(x, out=x)
    assert out is x
    np.testing.assert_array_equal(x, np.full(1001, size * (size + 1) / 2))
    y = np.ones(10, dtype=np.int32)
    target = np.zeros(10, dtype=np.int32)
    assert concord.allreduce(y, op="max", out=target) is target
    np.testing.assert_array_equal(target, np.ones(10, dtype=np.int32))


def test_buffers_without_copies(comm_info):
    _, size = comm_info
    raw = bytearray(np.ones(8, dtype=np.float32).tobytes())  # any buffer numpy can view
    view = np.frombuffer(raw, dtype=np.float32)
    concord.allreduce(view, out=view)
    np.testing.assert_array_equal(np.frombuffer(raw, dtype=np.float32), np.full(8, size))


@pytest.mark.parametrize("n", [0, 1, 65537, 300_000])  # 300,000 floats: the single-copy path
def test_shared_arrays(comm_info, n):
    rank, size = comm_info
    x = concord.empty_shared(n, np.float32)
    out = concord.empty_shared((n,), np.float32)
    assert x.shape == (n,) and x.dtype == np.float32 and x.flags.c_contiguous and x.flags.writeable
    if n:
        # From the node's heap wherever it has other ranks (CONCORD_SHM is on in these runs).
        assert concord.is_shared(x) == (concord.local_size() > 1)
        assert concord.is_shared(x[1:]) == concord.is_shared(x)  # views too
        assert x.__array_interface__["data"][0] % 4096 == 0
    x[:] = inputs(rank, n, np.float32, "sum")
    expected = reference(size, n, np.float32, "sum")
    assert concord.allreduce(x, out=out) is out
    np.testing.assert_array_equal(out.astype(np.float64), expected)
    concord.allreduce(x, out=x)  # in place
    np.testing.assert_array_equal(x.astype(np.float64), expected)
    grid = concord.empty_shared((3, 4), np.int64)
    assert grid.shape == (3, 4)
    assert not concord.is_shared(np.ones(3))
    with pytest.raises(TypeError, match="not supported"):
        concord.empty_shared(4, np.complex64)
    with pytest.raises(ValueError, match="negative"):
        concord.empty_shared((2, -1))
    with pytest.raises(TypeError):
        concord.empty_shared((2, 3.7))
    with pytest.raises(ValueError, match="more than a process can address"):
        concord.empty_shared((2**40, 2**40))
    assert concord.empty_shared(()).shape == ()


def test_bad_arrays_and_options(comm_info):
    x = np.ones((4, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        concord.allreduce(x[:, ::2])
    with pytest.raises(TypeError, match="complex128 is not supported"):
        concord.allreduce(np.ones(3, dtype=np.complex128))
    ro = np.ones(16, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        concord.allreduce(x, out=ro.reshape(4, 4))
    with pytest.raises(ValueError, match="expected float32"):
        concord.allreduce(x, out=np.ones((4, 4), dtype=np.float64))
    with pytest.raises(ValueError, match="op must be one of"):
        concord.allreduce(x, op="mean")
    with pytest.raises(concord.Error, match="unknown algorithm|accepted"):
        concord.allreduce(x, algorithm="tree")


def test_async_handles_complete_out_of_order(comm_info):
    rank, size = comm_info
    arrays = [np.full(50 + i, i + rank, dtype=np.float32) for i in range(20)]
    order = list(range(20))
    if rank % 2:
        order.reverse()  # ranks start them in different orders: matched by name
    handles = {i: concord.allreduce_async(arrays[i], name=f"grad/{i}") for i in order}
    for i in sorted(handles, reverse=True):
        got = handles[i].wait()
        assert handles[i].done()
        np.testing.assert_array_equal(got, np.full(50 + i, i * size + sum(range(size))))
    # avg with scaling, in place through out=
    y = np.full(5, 2.0, dtype=np.float64)
    assert concord.allreduce_async(y, op="avg", name="y", out=y).wait() is y
    np.testing.assert_array_equal(y, np.full(5, 2.0))


def test_dropped_handle_keeps_its_arrays_until_done(comm_info):
    """A Handle dropped before its operation completed: the engine still writes
    into the result, so the arrays live until it completes (then are let go),
    and the other ranks get the right sum. Every rank takes part in every
    collective before any assertion, so a failure cannot leave a rank waiting."""
    rank, size = comm_info
    if size < 2:
        pytest.skip("needs two ranks (alone, the operation may be done before it is dropped)")
    n = 1 << 16
    concord.allreduce_async(np.ones(1), name="dropped/warmup").wait()  # engine running
    out = np.zeros(n)
    alive = weakref.ref(out)
    kept, fresh, got = True, [], None
    if rank == 0:  # the others start theirs only after rank 0 dropped its handle
        concord.allreduce_async(np.full(n, 1.0), name="dropped", out=out)
        del out
        gc.collect()
        kept = alive() is not None
        fresh = [np.full(n, -7.0) for _ in range(8)]  # would take the freed memory
        concord.barrier()
    else:
        concord.barrier()
        got = concord.allreduce_async(np.full(n, 1.0), name="dropped", out=out).wait().copy()
        del out
    later = concord.allreduce_async(np.full(3, rank + 1.0), name="dropped/later").wait()
    concord.allreduce_async(np.ones(1), name="dropped/after").wait()  # lets go of what is done
    gc.collect()
    assert kept, "the engine's output array was freed while the operation was in flight"
    for f in fresh:
        np.testing.assert_array_equal(f, np.full(n, -7.0))
    if got is not None:
        np.testing.assert_array_equal(got, np.full(n, float(size)))
    np.testing.assert_array_equal(later, np.full(3, size * (size + 1) / 2))
    assert alive() is None, "the dropped operation's arrays were never let go"


def test_grouped_broadcast_allgather(comm_info):
    rank, size = comm_info
    a, b = concord.grouped_allreduce([np.ones(3), np.full((2, 2), rank, dtype=np.int64)])
    np.testing.assert_array_equal(a, np.full(3, size))
    np.testing.assert_array_equal(b, np.full((2, 2), sum(range(size))))

    w = np.arange(6, dtype=np.float32).reshape(2, 3) * (rank + 1)
    got = concord.broadcast(w, root=size - 1)
    np.testing.assert_array_equal(got, np.arange(6, dtype=np.float32).reshape(2, 3) * size)

    rows = np.full((rank + 1, 2), rank, dtype=np.int32)  # uneven first dimension
    gathered = concord.allgather(rows)
    expected = np.concatenate([np.full((r + 1, 2), r, dtype=np.int32) for r in range(size)])
    np.testing.assert_array_equal(gathered, expected)


def test_engine_errors_carry_the_code(comm_info):
    rank, size = comm_info
    if size < 2:
        pytest.skip("needs two ranks")
    x = np.ones(10 + (rank == 1), dtype=np.float32)  # rank 1 disagrees on the count
    with pytest.raises(concord.Error) as err:
        concord.allreduce_async(x, name="mismatch").wait()
    assert err.value.code == "argument mismatch across ranks"
    assert "mismatch" in str(err.value) and "count=10" in str(err.value)


def test_barrier_and_topology(comm_info):
    rank, size = comm_info
    concord.barrier()
    assert concord.rank() == rank and concord.size() == size
    assert 0 <= concord.local_rank() < concord.local_size() <= size
