"""concord.tensorflow's alltoall, reducescatter and join (Horovod's semantics),
eagerly and in tf.function, with their gradients, against numpy references."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
ctf = pytest.importorskip("concord.tensorflow")


@pytest.fixture(scope="module")
def world():
    ctf.init()
    return ctf.rank(), ctf.size()


def rows_between(src, dst):
    return (src + 2 * dst) % 3  # uneven, with zeros


def block(src, dst):
    n = rows_between(src, dst)
    return np.arange(n * 2, dtype=np.float64).reshape(n, 2) + 100 * src + 10 * dst


@pytest.mark.parametrize("dtype", [tf.float32, tf.int32, tf.float16])
def test_alltoall_eager_and_function(world, dtype):
    rank, size = world
    send = tf.cast(np.concatenate([block(rank, d) for d in range(size)]), dtype)
    splits = [rows_between(rank, d) for d in range(size)]
    expected = np.concatenate([block(s, rank) for s in range(size)])
    got, got_splits = ctf.alltoall(send, splits=splits, name=f"tf/a2a/{dtype.name}")
    np.testing.assert_array_equal(got.numpy().astype(np.float64), expected)
    np.testing.assert_array_equal(got_splits.numpy(), [rows_between(s, rank) for s in range(size)])
    assert got_splits.dtype == tf.int32

    @tf.function
    def f(x):
        return ctf.alltoall(x, splits=splits, name=f"tf/a2a/fn/{dtype.name}")
    got, _ = f(send)
    np.testing.assert_array_equal(got.numpy().astype(np.float64), expected)


def test_alltoall_even_split_and_gradient(world):
    rank, size = world
    x = tf.constant(np.arange(2 * size * 3, dtype=np.float32).reshape(2 * size, 3) + rank)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y, _ = ctf.alltoall(x, name="tf/a2a/grad")
        loss = tf.reduce_sum(y * tf.cast(tf.range(1, 2 * size + 1)[:, None], tf.float32))
    grad = tape.gradient(loss, x).numpy()
    # Row j of the output (from rank j // 2) had weight j + 1; it returns to its source
    # as row 2 * rank + j % 2 there: so row k of x, sent to rank k // 2, came back with
    # the weight its position had on that rank: 2 * rank + k % 2 + 1.
    expected = np.array([[2 * rank + k % 2 + 1] * 3 for k in range(2 * size)], np.float32)
    np.testing.assert_array_equal(grad, expected)
    with pytest.raises(tf.errors.InvalidArgumentError, match="add up to"):
        ctf.alltoall(x, splits=[1] * size, name="tf/a2a/bad")


@pytest.mark.parametrize("op", ["sum", "avg", "min", "max", "prod"])
def test_reducescatter(world, op):
    rank, size = world
    rows = 2 * size + 1
    inputs = [((np.arange(rows * 2) * 5 + r * 3) % 7 - 3).astype(np.float32).reshape(rows, 2)
              for r in range(size)]
    stack = np.stack(inputs).astype(np.float64)
    full = {"sum": stack.sum(0), "avg": stack.sum(0) / size, "min": stack.min(0),
            "max": stack.max(0), "prod": stack.prod(0)}[op]
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    got = ctf.reducescatter(tf.constant(inputs[rank]), op=op, name=f"tf/rs/{op}")
    np.testing.assert_allclose(got.numpy(), full[start:start + counts[rank]], rtol=1e-6)
    got = tf.function(lambda x: ctf.reducescatter(x, op=op, name=f"tf/rs/fn/{op}"))(
        tf.constant(inputs[rank]))
    np.testing.assert_allclose(got.numpy(), full[start:start + counts[rank]], rtol=1e-6)


def block_rows(rows, size):
    """Each rank's rows of a reducescatter, as Horovod splits them."""
    return [rows // size + (r < rows % size) for r in range(size)]


@pytest.mark.parametrize("op", ["sum", "avg"])
def test_reducescatter_gradient_and_scales(world, op):
    rank, size = world
    rows = size + 1
    x = tf.constant(np.ones((rows, 2), np.float32))
    mine = block_rows(rows, size)
    # Each rank weighs its block's elements differently, so the gradient shows
    # which rank's upstream gradient reached which rows.
    weights = lambda r: np.arange(mine[r] * 2, dtype=np.float32).reshape(-1, 2) + 10 * r + 1
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = ctf.reducescatter(x, op=op, name=f"tf/rs/grad/{op}", prescale=2.0, postscale=3.0)
        loss = tf.reduce_sum(y * weights(rank))
    np.testing.assert_allclose(y.numpy(), np.full(y.shape, 6.0 * (size if op == "sum" else 1)))
    # Horovod's _reducescatter_grad: every block's upstream gradient gathered,
    # times the scales, times size() for Sum (and not divided for Average).
    factor = 6.0 * (size if op == "sum" else 1)
    expected = factor * np.concatenate([weights(r) for r in range(size)])
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), expected)
    with pytest.raises(ValueError, match="op must be"):
        ctf.reducescatter(x, op="mean")


def test_join_uneven_steps(world):
    rank, size = world
    for step in range(rank + 1):
        x = tf.fill([5], float(rank + 1 + 10 * step))
        got = ctf.allreduce(x, op="sum", name="tf/join/grad").numpy()
        expected = sum(r + 1 + 10 * step for r in range(size) if r + 1 > step)
        np.testing.assert_array_equal(got, np.full(5, float(expected)))
    assert ctf.join() == size - 1
    last = tf.function(ctf.join)()  # again, inside tf.function: everyone joins at once
    assert int(last) in range(size)


def test_grouped_allreduce_scales(world):
    rank, size = world
    a = tf.fill([3], float(rank + 1))
    b = tf.fill([2], tf.constant(rank + 1, tf.float64))
    got = ctf.grouped_allreduce([a, b], op="sum", names=["tf/g/a", "tf/g/b"], prescale=2.0,
                                postscale=0.25)
    total = sum(r + 1 for r in range(size)) * 2.0 * 0.25
    np.testing.assert_allclose(got[0].numpy(), np.full(3, total))
    np.testing.assert_allclose(got[1].numpy(), np.full(2, total))
