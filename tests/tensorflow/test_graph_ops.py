"""concord's TensorFlow ops inside tf.function, where TensorFlow's graph
optimisations could drop, fold or reorder them on one rank: every rank must still
run every collective, once per call, in whatever order its executor chooses.
Run under mpiexec like test_ops.py; the cases need two ranks."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
ctf = pytest.importorskip("concord.tensorflow")


@pytest.fixture(scope="module")
def world():
    ctf.init()
    rank, size = ctf.rank(), ctf.size()
    if size < 2:
        pytest.skip("needs two ranks")
    return rank, size


def test_a_constant_input_is_reduced_on_every_call(world):
    """Rank 0 reduces a constant, the others a variable that changes between calls.
    Folded at optimisation (a stateless op of constant inputs), rank 0's allreduce
    would run once, and its later calls would return that first sum without an
    exchange while the others waited."""
    rank, size = world
    changing = tf.Variable([0.0, 0.0])

    @tf.function
    def from_constant():
        return ctf.allreduce(tf.constant([1.0, 2.0]) * 3.0, op="sum", name="fold/x")

    @tf.function
    def from_variable():
        return ctf.allreduce(changing.read_value(), op="sum", name="fold/x")

    for call in range(3):
        changing.assign([float(call), float(call + rank)])
        got = (from_constant() if rank == 0 else from_variable()).numpy()
        others = [np.array([call, call + r], np.float64) for r in range(1, size)]
        np.testing.assert_allclose(got, np.array([3.0, 6.0]) + np.sum(others, axis=0),
                                   err_msg=f"call {call}")


def test_a_result_one_rank_drops_is_still_exchanged(world):
    """Rank 0 ignores its allreduce's output; pruned there, the others would wait."""
    rank, size = world

    @tf.function
    def step(x):
        reduced = ctf.allreduce(x, op="sum", name="unused/x")
        return x + 1.0 if rank == 0 else reduced

    got = step(tf.constant([float(rank + 1)])).numpy()
    expected = 2.0 if rank == 0 else size * (size + 1) / 2
    np.testing.assert_allclose(got, [expected])


def test_every_collective_in_a_rank_dependent_order(world):
    """Each kind of collective, created in the opposite order on odd ranks: matched
    by name, none may wait for the one created before it (tf.function's program
    order for stateful ops would chain them, and the ranks' chains would cross)."""
    rank, size = world
    x = tf.fill([2 * size, 3], float(rank + 1))
    rows = tf.fill([rank + 1, 2], float(rank))

    @tf.function
    def step(x, rows):
        build = {
            "allreduce": lambda: ctf.allreduce(x, op="sum", name="mixed/ar"),
            "grouped": lambda: ctf.grouped_allreduce([x, 2.0 * x], op="max",
                                                     names=["mixed/g0", "mixed/g1"]),
            "broadcast": lambda: ctf.broadcast(x, root_rank=size - 1, name="mixed/bc"),
            "allgather": lambda: ctf.allgather(rows, name="mixed/ag"),
            "alltoall": lambda: ctf.alltoall(x, name="mixed/a2a")[0],
            "reducescatter": lambda: ctf.reducescatter(x, op="sum", name="mixed/rs"),
        }
        order = list(build) if rank % 2 == 0 else list(reversed(build))
        return {kind: build[kind]() for kind in order}

    got = step(x, rows)
    total = size * (size + 1) / 2
    np.testing.assert_allclose(got["allreduce"].numpy(), np.full((2 * size, 3), total))
    np.testing.assert_allclose(got["grouped"][0].numpy(), np.full((2 * size, 3), size))
    np.testing.assert_allclose(got["grouped"][1].numpy(), np.full((2 * size, 3), 2.0 * size))
    np.testing.assert_allclose(got["broadcast"].numpy(), np.full((2 * size, 3), size))
    expected_rows = np.concatenate([np.full((r + 1, 2), float(r)) for r in range(size)])
    np.testing.assert_allclose(got["allgather"].numpy(), expected_rows)
    # Even split: rank r gets two rows from every rank s, each filled with s + 1.
    expected_a2a = np.concatenate([np.full((2, 3), float(s + 1)) for s in range(size)])
    np.testing.assert_allclose(got["alltoall"].numpy(), expected_a2a)
    np.testing.assert_allclose(got["reducescatter"].numpy(), np.full((2, 3), total))
