"""concord's TensorFlow ops against numpy references, eagerly and in tf.function."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
ctf = pytest.importorskip("concord.tensorflow")

DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64]


@pytest.fixture(scope="module")
def world():
    ctf.init()
    return ctf.rank(), ctf.size()


def values(rank, n):
    return ((np.arange(n) * 13 + rank * 7) % 17 - 8).astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["sum", "avg", "min", "max", "prod"])
def test_allreduce_every_dtype(world, dtype, op):
    rank, size = world
    if op == "avg" and dtype.is_integer:
        with pytest.raises(tf.errors.InvalidArgumentError, match="avg"):
            ctf.allreduce(tf.ones([3], dtype), op=op, name=f"bad/{dtype.name}")
        return
    n = 37
    x = tf.cast(tf.constant(values(rank, n)), dtype)
    got = ctf.allreduce(x, op=op, name=f"ar/{dtype.name}/{op}").numpy().astype(np.float64)
    stack = np.stack([values(r, n) for r in range(size)])
    expected = {"sum": stack.sum(0), "avg": stack.sum(0) / size, "min": stack.min(0),
                "max": stack.max(0), "prod": stack.prod(0)}[op]
    tol = 1e-2 if dtype in (tf.float16, tf.bfloat16) else 1e-6
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def test_scaling_and_graph_mode(world):
    rank, size = world

    @tf.function
    def step(a, b):
        return (ctf.allreduce(a, op="sum", name="g/a", prescale=2.0, postscale=0.5),
                ctf.grouped_allreduce([a, b], op="avg", names=["g/x", "g/y"]))

    a = tf.fill([4, 3], float(rank + 1))
    b = tf.constant([rank, rank], tf.int64)
    s, (ga, gb) = step(a, tf.cast(b, tf.float64))
    np.testing.assert_allclose(s.numpy(), np.full((4, 3), size * (size + 1) / 2))
    np.testing.assert_allclose(ga.numpy(), np.full((4, 3), (size + 1) / 2))
    np.testing.assert_allclose(gb.numpy(), np.full(2, (size - 1) / 2))


def test_broadcast_allgather_uneven(world):
    rank, size = world
    got = ctf.broadcast(tf.fill([2, 2], rank + 10), root_rank=size - 1, name="b/t")
    np.testing.assert_array_equal(got.numpy(), np.full((2, 2), size + 9))
    rows = tf.fill([rank + 1, 3], float(rank))
    gathered = ctf.allgather(rows, name="ag/t").numpy()
    expected = np.concatenate([np.full((r + 1, 3), float(r)) for r in range(size)])
    np.testing.assert_array_equal(gathered, expected)


def test_rank_dependent_order_in_graph_mode(world):
    """Independent allreduces created (and so scheduled) in a different order on
    every rank: matched by name, they cannot deadlock."""
    rank, size = world
    names = [f"order/{i}" for i in range(24)]
    order = names[rank % len(names):] + names[:rank % len(names)]
    if rank % 2:
        order.reverse()

    @tf.function
    def step(x):
        out = {}
        for name in order:
            out[name] = ctf.allreduce(x * float(names.index(name) + 1), op="sum", name=name)
        return [out[n] for n in names]

    results = step(tf.ones([5]))
    for i, r in enumerate(results):
        np.testing.assert_array_equal(r.numpy(), np.full(5, float((i + 1) * size)))


def test_gradients(world):
    rank, size = world
    w = tf.Variable([1.0, 2.0])
    with ctf.DistributedGradientTape(tf.GradientTape()) as tape:
        loss = tf.reduce_sum(w * w) * (rank + 1)
    grad = tape.gradient(loss, [w])[0]
    np.testing.assert_allclose(grad.numpy(), np.array([2.0, 4.0]) * (size + 1) / 2)
    # The gradient of an allreduce is an allreduce of the gradient.
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape() as t:
        t.watch(x)
        z = tf.reduce_sum(ctf.allreduce(x, op="sum", name="d/x"))
    np.testing.assert_allclose(t.gradient(z, x).numpy(), np.full(2, size))


def test_a_gradient_missing_on_one_rank_travels_as_zeros(world):
    """A variable only rank 0's loss uses: the other ranks' gradient is None,
    sent as zeros, so every rank submits the same names and gets the average
    (d/db of 3 * sum(b) on rank 0 alone: 3 / size); a variable no rank uses
    comes back as zeros. The tape and the optimizer alike."""
    rank, size = world
    a = tf.Variable([1.0, 1.0], name="missing_a")
    b = tf.Variable([1.0, 1.0], name="missing_b")
    c = tf.Variable([1.0, 1.0, 1.0], name="missing_c")
    with ctf.DistributedGradientTape(tf.GradientTape()) as tape:
        loss = tf.reduce_sum(a * 2.0) + (tf.reduce_sum(b * 3.0) if rank == 0 else 0.0)
    ga, gb, gc = tape.gradient(loss, [a, b, c])
    np.testing.assert_allclose(ga.numpy(), [2.0, 2.0])
    np.testing.assert_allclose(gb.numpy(), [3.0 / size] * 2)
    np.testing.assert_allclose(gc.numpy(), [0.0] * 3)

    import keras
    opt = ctf.DistributedOptimizer(keras.optimizers.SGD(1.0))
    u = keras.Variable(np.ones(2, np.float32), name="missing_u")
    w = keras.Variable(np.ones(2, np.float32), name="missing_w")
    opt.apply([tf.constant([2.0, 2.0]), tf.constant([3.0, 3.0]) if rank == 0 else None], [u, w])
    np.testing.assert_allclose(u.numpy(), [-1.0, -1.0])
    np.testing.assert_allclose(w.numpy(), [1.0 - 3.0 / size] * 2)


def test_allgather_and_broadcast_gradients(world):
    """As Horovod's: allgather's gradient is the gathered tensor's gradient
    averaged over ranks, this rank's rows of it; broadcast's is the gradient
    averaged over ranks on the root, zeros elsewhere. Eagerly and in tf.function."""
    rank, size = world
    rows = [r + 1 for r in range(size)]  # uneven first dimensions
    starts = np.cumsum([0] + rows)
    weights = lambda r: np.arange(sum(rows) * 2, dtype=np.float32).reshape(-1, 2) * (r + 1)
    mean = np.mean([weights(r) for r in range(size)], axis=0)
    x = tf.constant(np.full((rows[rank], 2), rank, np.float32))
    root = size - 1
    b_weights = lambda r: np.array([1.0, 2.0, 3.0], np.float32) + 10 * r
    b_mean = np.mean([b_weights(r) for r in range(size)], axis=0)
    b = tf.constant(np.full(3, rank, np.float32))

    def grads(tag):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([x, b])
            gathered = ctf.allgather(x, name=f"tf/ag/grad/{tag}")
            loss = tf.reduce_sum(gathered * weights(rank))
            b_loss = tf.reduce_sum(ctf.broadcast(b, root_rank=root, name=f"tf/bc/grad/{tag}")
                                   * b_weights(rank))
        # The losses too: an op whose output nothing uses may be pruned from a graph.
        return tape.gradient(loss, x), tape.gradient(b_loss, b), loss + b_loss

    gathered = np.concatenate([np.full((rows[r], 2), r, np.float32) for r in range(size)])
    total = (gathered * weights(rank)).sum() + (np.full(3, root) * b_weights(rank)).sum()
    for tag, (gx, gb, both) in (("eager", grads("eager")), ("fn", tf.function(grads)("fn"))):
        np.testing.assert_allclose(both.numpy(), total, err_msg=tag)
        np.testing.assert_allclose(gx.numpy(), mean[starts[rank]:starts[rank + 1]], err_msg=tag)
        np.testing.assert_allclose(gb.numpy(), b_mean if rank == root else np.zeros(3),
                                   err_msg=tag)


def test_sparse_gradients_via_allgather(world):
    rank, size = world
    emb = tf.Variable(tf.zeros([10, 2]))
    with ctf.DistributedGradientTape(tf.GradientTape()) as tape:
        loss = tf.reduce_sum(tf.gather(emb, [rank % 10]))
    grad = tape.gradient(loss, [emb])[0]
    assert isinstance(grad, tf.IndexedSlices)
    dense = tf.convert_to_tensor(grad).numpy()
    expected = np.zeros((10, 2))
    for r in range(size):
        expected[r % 10] += 1.0 / size
    np.testing.assert_allclose(dense, expected)


def test_broadcast_variables_and_optimizer(world):
    import keras
    rank, size = world
    v = tf.Variable(tf.fill([3], float(rank)))
    ctf.broadcast_variables([v], root_rank=0)
    np.testing.assert_array_equal(v.numpy(), np.zeros(3))
    opt = ctf.DistributedOptimizer(keras.optimizers.SGD(1.0))
    w = keras.Variable(np.zeros(2, np.float32), name="w_opt")
    opt.apply([tf.constant([rank + 1.0, 0.0])], [w])
    np.testing.assert_allclose(w.numpy(), [-(size + 1) / 2, 0.0])


def test_mismatch_is_an_error(world):
    rank, size = world
    if size < 2:
        pytest.skip("needs two ranks")
    with pytest.raises(tf.errors.InvalidArgumentError, match="submitted it differently"):
        ctf.allreduce(tf.ones([3 + rank]), op="sum", name="mismatch")
