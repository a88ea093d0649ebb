"""torch.distributed collectives through the "concord" backend, each checked
against a reference computed here from every rank's inputs (which each rank can
generate itself: they are functions of the rank)."""
import functools
import operator
import time

import pytest
import torch
import torch.distributed as dist

REDUCE_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                 torch.int64, torch.int8, torch.uint8]
OPS = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.PRODUCT: "prod", dist.ReduceOp.MIN: "min",
       dist.ReduceOp.MAX: "max", dist.ReduceOp.AVG: "avg"}


def rank_input(rank, n, dtype, salt=0):
    """Rank `rank`'s input: small integers (exact in every dtype, products too)."""
    values = (torch.arange(n, dtype=torch.int64) * 7 + rank * 3 + salt) % 3 + 1
    if dtype in (torch.complex64, torch.complex128):
        return torch.complex(values.double(), -values.double()).to(dtype)
    return values.to(dtype)


def reference(op, tensors):
    stacked = torch.stack([t.to(torch.complex128) if t.is_complex() else t.double()
                           for t in tensors])
    if op == "sum":
        return stacked.sum(0)
    if op == "avg":
        return stacked.sum(0) / len(tensors)
    if op == "prod":
        return functools.reduce(operator.mul, stacked)
    return stacked.min(0).values if op == "min" else stacked.max(0).values


def everyone(n, dtype, salt=0):
    size = dist.get_world_size()
    return [rank_input(r, n, dtype, salt) for r in range(size)]


@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=str)
@pytest.mark.parametrize("op", list(OPS), ids=lambda o: OPS[o])
def test_allreduce_every_dtype_and_op(group, path, dtype, op):
    name = OPS[op]
    if name == "avg" and not dtype.is_floating_point:
        pytest.skip("avg reduces floating dtypes only")
    n = 1000
    t = rank_input(dist.get_rank(), n, dtype)
    dist.all_reduce(t, op=op, group=path)
    expected = reference(name, everyone(n, dtype))
    if dtype.is_floating_point:
        assert torch.allclose(t.double(), expected, rtol=1e-2 if t.element_size() == 2 else 1e-6)
    else:
        assert torch.equal(t, expected.to(dtype))


@pytest.mark.parametrize("n", [0, 1, 7, 65536, 1 << 20])
def test_allreduce_sizes(group, path, n):
    t = rank_input(dist.get_rank(), n, torch.float32)
    dist.all_reduce(t, group=path)
    assert torch.equal(t.double(), reference("sum", everyone(n, torch.float32)))


def test_allreduce_complex(group):
    t = rank_input(dist.get_rank(), 100, torch.complex64)
    dist.all_reduce(t)
    assert torch.allclose(t.to(torch.complex128), reference("sum", everyone(100, torch.complex64)))


def test_allreduce_noncontiguous(group, path):
    base = rank_input(dist.get_rank(), 200, torch.float64).reshape(20, 10)
    view = base.t()  # not contiguous: reduced through a copy, written back
    dist.all_reduce(view, group=path)
    expected = reference("sum", [t.reshape(20, 10) for t in everyone(200, torch.float64)])
    assert torch.equal(base, expected)


def test_allreduce_async_future_chain(group, path):
    t = rank_input(dist.get_rank(), 1000, torch.float32)
    work = dist.all_reduce(t, async_op=True, group=path)
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2)
    assert torch.equal(doubled.wait(), 2 * reference("sum", everyone(1000, torch.float32)).float())
    assert work.is_completed() and work.is_success()


def test_many_async_allreduces_in_flight(group, path):
    # More than the backend's name window of one kind (256) outstanding at once.
    tensors = [rank_input(dist.get_rank(), 10, torch.float32, salt=i) for i in range(300)]
    works = [dist.all_reduce(t, async_op=True, group=path) for t in tensors]
    for w in works:
        w.wait()
    for i, t in enumerate(tensors):
        assert torch.equal(t.double(), reference("sum", everyone(10, torch.float32, salt=i)))


def test_allreduce_coalesced(group):
    tensors = [rank_input(dist.get_rank(), n, torch.float64, salt=n) for n in (3, 100, 5000)]
    dist.all_reduce_coalesced(tensors, op=dist.ReduceOp.MAX)
    for t, n in zip(tensors, (3, 100, 5000)):
        assert torch.equal(t, reference("max", everyone(n, torch.float64, salt=n)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.int16, torch.complex128],
                         ids=str)
def test_broadcast_from_every_root(group, dtype):
    for root in range(dist.get_world_size()):
        t = rank_input(dist.get_rank(), 33, torch.int64).to(dtype)
        dist.broadcast(t, src=root)
        assert torch.equal(t, rank_input(root, 33, torch.int64).to(dtype))


def test_all_gather(group):
    size, rank = dist.get_world_size(), dist.get_rank()
    outputs = [torch.empty(4, 3) for _ in range(size)]
    dist.all_gather(outputs, rank_input(rank, 12, torch.float32).reshape(4, 3))
    for r in range(size):
        assert torch.equal(outputs[r], rank_input(r, 12, torch.float32).reshape(4, 3))


def test_all_gather_into_tensor(group):
    size, rank = dist.get_world_size(), dist.get_rank()
    out = torch.empty(size * 6, dtype=torch.int32)
    dist.all_gather_into_tensor(out, rank_input(rank, 6, torch.int32))
    assert torch.equal(out, torch.cat([rank_input(r, 6, torch.int32) for r in range(size)]))


def test_all_gather_into_tensor_coalesced(group):
    size, rank = dist.get_world_size(), dist.get_rank()
    pg = dist.distributed_c10d._get_default_group()
    inputs = [rank_input(rank, n, torch.float32, salt=n) for n in (2, 9)]
    outputs = [torch.empty(size * n) for n in (2, 9)]
    pg.allgather_into_tensor_coalesced(outputs, inputs).wait()
    for out, n in zip(outputs, (2, 9)):
        assert torch.equal(out, torch.cat([rank_input(r, n, torch.float32, salt=n)
                                           for r in range(size)]))


def test_reduce_scatter(group):
    size, rank = dist.get_world_size(), dist.get_rank()
    inputs = [rank_input(rank, 5, torch.float64, salt=block) for block in range(size)]
    out = torch.empty(5, dtype=torch.float64)
    dist.reduce_scatter(out, inputs)
    assert torch.equal(out, reference("sum", everyone(5, torch.float64, salt=rank)))


def test_reduce_scatter_tensor(group):
    size, rank = dist.get_world_size(), dist.get_rank()
    out = torch.empty(8)
    dist.reduce_scatter_tensor(out, rank_input(rank, 8 * size, torch.float32),
                               op=dist.ReduceOp.AVG)
    expected = reference("avg", everyone(8 * size, torch.float32))[rank * 8:(rank + 1) * 8]
    assert torch.allclose(out.double(), expected)


PREMUL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64]


def premul_factor(rank):
    return 0.5 * (rank + 1)  # a different factor on every rank, exact in half


def premul_reference(n, dtype):
    """NCCL's PREMUL_SUM: each rank's input times that rank's own factor, summed."""
    return sum(premul_factor(r) * t for r, t in enumerate(everyone(n, dtype)))


@pytest.mark.parametrize("dtype", PREMUL_DTYPES, ids=str)
def test_premul_sum_with_each_ranks_own_factor(group, path, dtype):
    rank = dist.get_rank()
    expected = premul_reference(1000, dtype)
    # A double factor, and a tensor factor (as FSDP passes it).
    for factor in (premul_factor(rank), torch.tensor([premul_factor(rank)])):
        t = rank_input(rank, 1000, dtype)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor), group=path)
        assert torch.equal(t, expected), (factor, t[:4], expected[:4])
    base = rank_input(rank, 12, dtype).reshape(3, 4)  # a non-contiguous view, in place
    dist.all_reduce(base.t(), op=dist._make_nccl_premul_sum(premul_factor(rank)), group=path)
    assert torch.equal(base, premul_reference(12, dtype).reshape(3, 4))


@pytest.mark.parametrize("dtype", PREMUL_DTYPES, ids=str)
def test_premul_sum_reduce_scatter_leaves_the_input_as_it_was(group, dtype):
    size, rank = dist.get_world_size(), dist.get_rank()
    op = dist._make_nccl_premul_sum(premul_factor(rank))
    inp = rank_input(rank, 4 * size, dtype)
    out = torch.empty(4, dtype=dtype)
    dist.reduce_scatter_tensor(out, inp, op=op)
    assert torch.equal(out, premul_reference(4 * size, dtype)[rank * 4:(rank + 1) * 4])
    assert torch.equal(inp, rank_input(rank, 4 * size, dtype))
    blocks = [rank_input(rank, 3, dtype, salt=b) for b in range(size)]
    dist.reduce_scatter(out[:3], blocks, op=op)
    expected = sum(premul_factor(r) * rank_input(r, 3, dtype, salt=rank) for r in range(size))
    assert torch.equal(out[:3], expected)
    assert all(torch.equal(b, rank_input(rank, 3, dtype, salt=i)) for i, b in enumerate(blocks))


def test_all_to_all_single_even_and_uneven(group):
    size, rank = dist.get_world_size(), dist.get_rank()
    # Even: rank r sends its block j (2 rows of 3) to rank j.
    inp = rank_input(rank, size * 6, torch.float32).reshape(size * 2, 3)
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    for j in range(size):
        sent = rank_input(j, size * 6, torch.float32).reshape(size * 2, 3)
        assert torch.equal(out[j * 2:(j + 1) * 2], sent[rank * 2:(rank + 1) * 2])
    # Uneven: rank r sends r + j + 1 rows to rank j.
    def splits(r):
        return [r + j + 1 for j in range(size)]
    inp = torch.full((sum(splits(rank)), 2), float(rank))
    recv = [splits(j)[rank] for j in range(size)]
    out = torch.empty(sum(recv), 2)
    dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=splits(rank))
    assert torch.equal(out, torch.cat([torch.full((recv[j], 2), float(j)) for j in range(size)]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.int64,
                                   torch.bool, torch.int16, torch.complex64, torch.complex128],
                         ids=str)
def test_moving_collectives_keep_every_dtype(group, dtype):
    # Each travels in concord's own dtype where it has one (complex as pairs of
    # its real type), as bytes otherwise: the values arrive exactly either way.
    size, rank = dist.get_world_size(), dist.get_rank()
    rows = [rank_input(r, size * 6, torch.int64).reshape(size * 2, 3).to(dtype)
            for r in range(size)]
    out = torch.empty(size * size * 2, 3, dtype=dtype)
    dist.all_gather_into_tensor(out, rows[rank])
    assert torch.equal(out, torch.cat(rows))
    gathered = [torch.empty(size * 2, 3, dtype=dtype) for _ in range(size)]
    dist.all_gather(gathered, rows[rank])
    assert all(torch.equal(g, r) for g, r in zip(gathered, rows))
    out = torch.empty(size * 2, 3, dtype=dtype)
    dist.all_to_all_single(out, rows[rank])
    assert torch.equal(out, torch.cat([r[rank * 2:(rank + 1) * 2] for r in rows]))
    t = rows[rank].clone()
    dist.broadcast(t, src=size - 1)
    assert torch.equal(t, rows[size - 1])


def test_barrier(group, path):
    dist.barrier(group=path)


def test_barrier_completes_after_the_asynchronous_allreduces_before_it(group, path):
    # On the engine the allreduces' completions run on the completer's threads,
    # where the barrier's may come first: a few rounds, so that a barrier that
    # does not wait for them shows (about 1 round in 200 did before it waited).
    expected = [reference("sum", everyone(1 << 16, torch.float32, salt=i)) for i in range(8)]
    for _ in range(20):
        tensors = [rank_input(dist.get_rank(), 1 << 16, torch.float32, salt=i) for i in range(8)]
        works = [dist.all_reduce(t, async_op=True, group=path) for t in tensors]
        dist.barrier(group=path)
        assert all(w.is_completed() for w in works)
        for t, e in zip(tensors, expected):
            assert torch.equal(t.double(), e)


@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=str)
def test_direct_allreduce_every_dtype(make_group, dtype):
    if dist.get_world_size() == 1:
        pytest.skip("one rank has no direct path")
    g = make_group(direct=True)  # explicitly, whatever the default
    for n, op in ((1, "sum"), (1000, "max"), (70000, "sum")):
        t = rank_input(dist.get_rank(), n, dtype)
        dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM, group=g)
        expected = reference(op, everyone(n, dtype))
        if dtype.is_floating_point:
            assert torch.allclose(t.double(), expected,
                                  rtol=1e-2 if t.element_size() == 2 else 1e-6)
        else:
            assert torch.equal(t, expected.to(dtype))
    t = rank_input(dist.get_rank(), 64, torch.float32)[::2]  # not contiguous: staged
    dist.all_reduce(t, group=g)
    assert torch.equal(t.double(), reference("sum", everyone(64, torch.float32))[::2])
    dist.destroy_process_group(g)


@pytest.mark.parametrize("before", ["direct", "engine"])
def test_a_synchronous_allreduce_runs_after_the_asynchronous_ones_before_it(group, before):
    # Neither an asynchronous direct allreduce (on the lane's thread) nor one of
    # the engine's (allreduce_coalesced) may be overtaken: here both reduce the
    # same tensor, so the order shows in the result (size * size * x).
    size = dist.get_world_size()
    for n in (1, 1000, 1 << 18):
        t = rank_input(dist.get_rank(), n, torch.float64)
        if before == "direct":
            work = dist.all_reduce(t, async_op=True)
        else:
            work = dist.all_reduce_coalesced([t], async_op=True)
        dist.all_reduce(t)
        expected = reference("sum", everyone(n, torch.float64)) * size
        work.wait()
        assert torch.equal(t, expected)


def test_ranks_may_pass_different_async_op_to_one_allreduce(group):
    # As DDP's Join does: a joined rank shadows the others' asynchronous
    # allreduces, several in flight, with synchronous ones. Each is one call,
    # in call order, whatever async_op each rank passed.
    rank = dist.get_rank()
    for i in range(6):
        tensors = [rank_input(rank, 100 + j, torch.float32, salt=i + j) for j in range(5)]
        if (rank + i) % 2:
            for t in tensors:
                dist.all_reduce(t)
        else:
            works = [dist.all_reduce(t, async_op=True) for t in tensors]
            for w in works:
                w.wait()
        for j, t in enumerate(tensors):
            expected = reference("sum", everyone(100 + j, torch.float32, salt=i + j))
            assert torch.equal(t.double(), expected)


def group_with_a_late_rank(make_group):
    """A direct group with a 1 s timeout, this process's rank, and the group's
    last rank, which the test keeps away from the group's calls until
    late_rank_comes."""
    import datetime

    if dist.get_world_size() == 1:
        pytest.skip("needs two ranks")
    g = make_group(direct=True, timeout=datetime.timedelta(seconds=1))
    return g, dist.get_rank(), dist.get_world_size() - 1


def late_rank_comes(g, late):
    """The late rank comes now (after a barrier on the default group) and fails:
    the others gave up on the communicator. Then the group goes."""
    dist.barrier()
    if dist.get_rank() == late:
        with pytest.raises(dist.DistBackendError, match="gave up on this communicator"):
            dist.all_reduce(torch.ones(64), group=g)
    dist.destroy_process_group(g)


def test_a_rank_that_never_comes_fails_an_asynchronous_call(make_group):
    g, rank, late = group_with_a_late_rank(make_group)
    t = torch.ones(64)
    if rank != late:
        work = dist.all_reduce(t, group=g, async_op=True)
        with pytest.raises(dist.DistBackendError,
                           match=f"all_reduce #1 of group .*rank {late} did not reach this call"):
            work.wait()
        with pytest.raises(dist.DistBackendError, match="did not reach this call"):
            dist.barrier(group=g)  # the group has failed for good
    late_rank_comes(g, late)


def test_destroying_a_group_cancels_its_calls_that_have_not_started(make_group):
    # A rank leaving after an error must not wait out the calls it queued: the
    # running one ends at the group's timeout, the ones behind it at once.
    import datetime

    if dist.get_world_size() == 1:
        pytest.skip("needs two ranks")
    # Long enough that the calls behind the first are still queued at the
    # destroy, which comes microseconds after them.
    g = make_group(direct=True, timeout=datetime.timedelta(seconds=3))
    if dist.get_rank() == 0:  # the others never come
        works = [dist.all_reduce(torch.ones(8), group=g, async_op=True) for _ in range(3)]
        start = time.monotonic()
        dist.destroy_process_group(g)
        assert time.monotonic() - start < 30  # bounded by the running call's deadline
        # The first has started (or, on a stalled machine, not yet).
        with pytest.raises(dist.DistBackendError,
                           match="did not reach this call|shut down before this call ran"):
            works[0].wait()
        for w in works[1:]:
            with pytest.raises(dist.DistBackendError, match="shut down before this call ran"):
                w.wait()
    else:
        dist.destroy_process_group(g)
    dist.barrier()


def test_aborting_a_group_stops_its_running_call(make_group):
    # c10d's abort (ProcessGroup.abort, _abort_process_group): unlike destroy,
    # the call already running stops waiting for its peers and fails now.
    import datetime

    if dist.get_world_size() == 1:
        pytest.skip("needs two ranks")
    g = make_group(direct=True, timeout=datetime.timedelta(seconds=60))
    late = dist.get_world_size() - 1
    if dist.get_rank() != late:  # the late rank never comes
        work = dist.all_reduce(torch.ones(8), group=g, async_op=True)
        queued = dist.all_reduce(torch.ones(8), group=g, async_op=True)
        time.sleep(0.3)  # the first is running, waiting for the late rank
        start = time.monotonic()
        g.abort()
        assert time.monotonic() - start < 10  # not the group's 60 s
        with pytest.raises(dist.DistBackendError,
                           match="aborted the communicator.*all_reduce #1 of group"):
            work.wait()
        with pytest.raises(dist.DistBackendError, match="shut down before this call ran"):
            queued.wait()
    else:
        g.abort()
    dist.destroy_process_group(g)
    dist.barrier()


def test_aborting_a_group_stops_a_collective_waiting_in_its_engine(make_group):
    # The engine's collectives too (Engine::abort): an allreduce the late rank
    # never submits fails at the abort, not at the group's stall timeout.
    import datetime

    if dist.get_world_size() == 1:
        pytest.skip("needs two ranks")
    g = make_group(direct=False, timeout=datetime.timedelta(seconds=60))
    late = dist.get_world_size() - 1
    t = torch.ones(8)
    dist.all_reduce(t, group=g)  # the engines have met
    assert t.tolist() == [float(dist.get_world_size())] * 8
    if dist.get_rank() != late:
        work = dist.all_reduce(torch.ones(8), group=g, async_op=True)
        time.sleep(0.3)  # negotiating, waiting for the late rank's tensor
        start = time.monotonic()
        g.abort()
        with pytest.raises(dist.DistBackendError, match=r"aborted the engine \(Engine::abort\)"):
            work.wait()
        assert time.monotonic() - start < 10
    else:
        g.abort()
    dist.destroy_process_group(g)
    dist.barrier()


def test_a_rank_that_never_comes_fails_a_synchronous_call_for_good(make_group):
    g, rank, late = group_with_a_late_rank(make_group)
    t = torch.ones(64)
    dist.all_reduce(t, group=g)
    if rank != late:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError,
                           match=f"all_reduce #2 of group .*rank {late} did not reach this call"):
            dist.all_reduce(t, group=g)
        assert 1.0 <= time.monotonic() - start < 30
        with pytest.raises(dist.DistBackendError, match="did not reach this call"):
            dist.all_reduce(t, group=g)  # the group has failed for good
    late_rank_comes(g, late)


def test_subgroup_and_gloo_group_side_by_side(group):
    size, rank = dist.get_world_size(), dist.get_rank()
    members = list(range(0, size, 2))  # the even ranks
    sub = dist.new_group(members, backend="concord")
    gloo = dist.new_group(backend="gloo")
    if rank in members:
        t = torch.full((3,), float(rank))
        dist.all_reduce(t, group=sub)
        assert torch.equal(t, torch.full((3,), float(sum(members))))
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=gloo)
    assert torch.equal(t, torch.full((3,), float(sum(range(size)))))
    dist.destroy_process_group(sub)
    dist.destroy_process_group(gloo)


def test_destroying_a_group_waits_for_its_completions(group):
    # A Future's callback still running when destroy_process_group returns could
    # outlive the interpreter (a tensor let go of without the GIL at exit).
    sub = dist.new_group(backend="concord")
    ran = []

    def slow_callback(fut):
        time.sleep(0.3)
        ran.append(fut.value()[0].sum().item())
        return fut.value()

    t = torch.ones(8)
    work = dist.all_reduce(t, group=sub, async_op=True)
    work.get_future().then(slow_callback)
    work.wait()  # done; its Future's callback runs next, on the backend's completer
    dist.destroy_process_group(sub)
    assert ran == [8.0 * dist.get_world_size()]


def test_coalesced_call_with_more_tensors_than_the_name_window(group):
    # 300 tensors in one call: more than the backend's 256 names per kind.
    tensors = [torch.full((2,), float(dist.get_rank() + i)) for i in range(300)]
    dist.all_reduce_coalesced(tensors)
    size = dist.get_world_size()
    for i, t in enumerate(tensors):
        assert torch.equal(t, torch.full((2,), float(sum(r + i for r in range(size)))))


def test_a_future_callback_may_wait_on_another_collective(group):
    # As DDP's PowerSGD hook does: a then() callback runs a second allreduce and
    # waits on its future.
    first = torch.ones(4)
    second = torch.ones(4)

    def then_reduce_again(fut):
        dist.all_reduce(second, async_op=True).get_future().wait()
        return fut.value()[0] + second

    chained = dist.all_reduce(first, async_op=True).get_future().then(then_reduce_again)
    size = float(dist.get_world_size())
    assert torch.equal(chained.wait(), torch.full((4,), 2 * size))


def test_a_completed_collective_releases_its_tensors(group):
    import gc
    import weakref

    t = torch.ones(1000)
    ref = weakref.ref(t)
    dist.all_reduce(t)
    del t
    gc.collect()
    assert ref() is None
