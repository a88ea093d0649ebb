"""concord.horovod.torch's collectives at 1-3 ranks (under mpiexec), each
against a reference the test computes from every rank's inputs (which every
rank can make: they depend on the rank number only)."""
import os

import pytest
import torch

import concord.horovod.torch as hvd
from concord.horovod._unsupported import HorovodFeatureNotProvided

RANK = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", 0)))
SIZE = int(os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", 1)))

REDUCED = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
           torch.int64, torch.int8, torch.uint8]


@pytest.fixture(scope="module", autouse=True)
def started():
    hvd.init()


def data(rank, dtype=torch.float32, n=7):
    """Rank `rank`'s input: small values, so sums and products stay exact."""
    values = torch.arange(n, dtype=torch.float64) % 3 + rank + 1
    return values.to(dtype)


def every(dtype=torch.float32, n=7):
    return torch.stack([data(r, dtype, n).double() for r in range(SIZE)])


def tolerance(dtype):
    return {"float16": 1e-2, "bfloat16": 2e-2}.get(str(dtype).replace("torch.", ""), 1e-6)


def test_process_basics():
    assert (hvd.rank(), hvd.size()) == (RANK, SIZE)
    assert 0 <= hvd.local_rank() < hvd.local_size() <= SIZE
    assert hvd.is_initialized() and hvd.mpi_enabled() and not hvd.gloo_enabled()


@pytest.mark.parametrize("dtype", REDUCED, ids=str)
@pytest.mark.parametrize("op", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce_every_op_and_dtype(op, dtype):
    all_ranks = every(dtype)
    # Integers average as in Horovod: the sum floor-divided by the rank count.
    mean = all_ranks.mean(0) if dtype.is_floating_point else all_ranks.sum(0) // SIZE
    expected = {"Sum": all_ranks.sum(0), "Average": mean,
                "Min": all_ranks.min(0).values, "Max": all_ranks.max(0).values,
                "Product": all_ranks.prod(0)}[op]
    x = data(RANK, dtype)
    out = hvd.allreduce(x, op=getattr(hvd, op), name=f"every.{op}.{dtype}")
    assert out.dtype == dtype and torch.equal(x, data(RANK, dtype))  # input untouched
    torch.testing.assert_close(out.double(), expected, rtol=tolerance(dtype), atol=0)


def test_allreduce_forms_and_scales():
    expected = every().sum(0)
    x = data(RANK)
    assert hvd.allreduce_(x, op=hvd.Sum) is x
    torch.testing.assert_close(x.double(), expected)
    y = data(RANK, torch.float64)
    h = hvd.allreduce_async(y, prescale_factor=2.0, postscale_factor=0.5, name="scaled")
    out = hvd.synchronize(h)
    torch.testing.assert_close(out, every(torch.float64).mean(0))
    with pytest.raises(ValueError, match="not an outstanding"):
        hvd.synchronize(h)
    # Averaging the deprecated way (average=True) and Horovod's default (Average).
    torch.testing.assert_close(hvd.allreduce(data(RANK, torch.float64), average=True),
                               every(torch.float64).mean(0))
    torch.testing.assert_close(hvd.allreduce(data(RANK, torch.float64)),
                               every(torch.float64).mean(0))


def test_allreduce_noncontiguous_in_place_and_empty():
    base = torch.stack([data(RANK, torch.float64), data(RANK, torch.float64)], 1)
    column = base[:, 1]
    assert not column.is_contiguous()
    hvd.allreduce_(column, op=hvd.Sum)
    torch.testing.assert_close(base[:, 1], every(torch.float64).sum(0))
    torch.testing.assert_close(base[:, 0], data(RANK, torch.float64))  # the rest untouched
    empty = hvd.allreduce(torch.zeros(0), op=hvd.Sum, name="empty")
    assert empty.shape == (0,)


def test_ranks_may_start_named_collectives_in_different_orders():
    names = ["first", "second", "third"]
    order = names if RANK % 2 == 0 else names[::-1]
    handles = {n: hvd.allreduce_async(data(RANK, torch.float64) * (i + 1), name=f"order.{n}",
                                      op=hvd.Sum)
               for n in order for i in [names.index(n)]}
    for i, n in enumerate(names):
        torch.testing.assert_close(hvd.synchronize(handles[n]),
                                   every(torch.float64).sum(0) * (i + 1))


def test_poll_and_many_in_flight():
    handles = [hvd.allreduce_async(torch.full((3,), float(RANK + i)), op=hvd.Sum)
               for i in range(200)]
    results = [hvd.synchronize(h) for h in handles]
    for i, out in enumerate(results):
        assert out.tolist() == [sum(r + i for r in range(SIZE))] * 3
    h = hvd.allreduce_async(torch.ones(2))
    while not hvd.poll(h):
        pass
    assert hvd.synchronize(h).tolist() == [1.0, 1.0]


def test_grouped_allreduce():
    tensors = [data(RANK, torch.float64, n) for n in (1, 5, 1000)]
    outs = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="group")
    for n, out in zip((1, 5, 1000), outs):
        torch.testing.assert_close(out, every(torch.float64, n).sum(0))
    in_place = [data(RANK, torch.float32, 4), data(RANK, torch.float32, 2)]
    assert hvd.grouped_allreduce_(in_place, op=hvd.Average)[0] is in_place[0]
    torch.testing.assert_close(in_place[1].double(), every(torch.float32, 2).mean(0))
    h = hvd.grouped_allreduce_async([torch.ones(3), torch.ones(2, dtype=torch.int64)],
                                    op=hvd.Sum)
    a, b = hvd.synchronize(h)
    assert a.tolist() == [float(SIZE)] * 3 and b.tolist() == [SIZE] * 2


def test_compression_fp16():
    x = data(RANK, torch.float64)
    out = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, every(torch.float64).sum(0))


def rows_of(rank, dtype=torch.float32):
    """rank's allgather input: rank + 1 rows of 2 x 3."""
    return (torch.arange((rank + 1) * 6, dtype=torch.float64) + 100 * rank).reshape(
        rank + 1, 2, 3).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.bool, torch.complex64],
                         ids=str)
def test_allgather_uneven_rows_any_dtype(dtype):
    expected = torch.cat([rows_of(r, dtype) for r in range(SIZE)])
    out = hvd.allgather(rows_of(RANK, dtype), name=f"gather.{dtype}")
    assert out.dtype == dtype and torch.equal(out, expected)
    scalar = hvd.allgather(torch.tensor(float(RANK)))
    assert scalar.tolist() == [float(r) for r in range(SIZE)]
    a, b = hvd.grouped_allgather([rows_of(RANK), torch.tensor([RANK])])
    assert torch.equal(a, torch.cat([rows_of(r) for r in range(SIZE)]))
    assert b.tolist() == list(range(SIZE))


def test_broadcast_forms():
    root = SIZE - 1
    x = data(RANK, torch.float64)
    out = hvd.broadcast(x, root_rank=root, name="bcast")
    assert torch.equal(out, data(root, torch.float64))
    assert torch.equal(x, data(RANK, torch.float64))
    flags = torch.tensor([RANK % 2 == 0, True])
    assert hvd.broadcast_(flags, 0) is flags and flags.tolist() == [True, True]
    with pytest.raises(ValueError, match="root_rank"):
        hvd.broadcast(x, root_rank=SIZE)


def test_alltoall_even_and_uneven():
    rows = torch.arange(SIZE * 2, dtype=torch.float32).reshape(SIZE * 2, 1) + 10 * RANK
    out = hvd.alltoall(rows)
    expected = torch.cat([(torch.arange(SIZE * 2.0) + 10 * r)[2 * RANK:2 * RANK + 2]
                          for r in range(SIZE)]).reshape(-1, 1)
    assert torch.equal(out, expected)
    # Rank r sends j + 1 rows to rank j.
    splits = torch.tensor([j + 1 for j in range(SIZE)], dtype=torch.int32)
    send = torch.arange(int(splits.sum()), dtype=torch.int64) + 1000 * RANK
    got, received = hvd.alltoall(send, splits=splits)
    assert received.tolist() == [RANK + 1] * SIZE
    start = sum(j + 1 for j in range(RANK))
    assert got.tolist() == [1000 * r + start + k for r in range(SIZE) for k in range(RANK + 1)]
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(send, splits=[1] * (SIZE + 1))


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter_uneven_rows(op):
    rows = 2 * SIZE + 1
    inputs = [torch.arange(rows * 2, dtype=torch.float64).reshape(rows, 2) * (r + 1)
              for r in range(SIZE)]
    reduced = torch.stack(inputs).sum(0) / (SIZE if op == "Average" else 1)
    counts = [rows // SIZE + (1 if r < rows % SIZE else 0) for r in range(SIZE)]
    start = sum(counts[:RANK])
    out = hvd.reducescatter(inputs[RANK], op=getattr(hvd, op))
    torch.testing.assert_close(out, reduced[start:start + counts[RANK]])
    with pytest.raises(ValueError, match="Average and hvd.Sum"):
        hvd.reducescatter(inputs[RANK], op=hvd.Max)


def test_gradients_flow_through_collectives():
    x = data(RANK, torch.float64).requires_grad_()
    (hvd.allreduce(x, op=hvd.Sum) * 2).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0 * SIZE))
    g = rows_of(RANK, torch.float64).requires_grad_()
    weights = torch.arange(sum(r + 1 for r in range(SIZE)), dtype=torch.float64)
    (hvd.allgather(g) * weights.reshape(-1, 1, 1)).sum().backward()
    # Every rank's loss is the same function of the gathered rows: averaged
    # over ranks, rank r's rows get their own weights.
    start = sum(r + 1 for r in range(RANK))
    expected = weights[start:start + RANK + 1].reshape(-1, 1, 1).expand_as(g)
    torch.testing.assert_close(g.grad, expected)


def test_gradients_of_broadcast_alltoall_reducescatter_and_groups():
    # broadcast: the gradient averaged over ranks, on the root only (Horovod's).
    x = data(RANK, torch.float64).requires_grad_()
    (hvd.broadcast(x, root_rank=0) * (RANK + 1)).sum().backward()
    mean_weight = sum(r + 1 for r in range(SIZE)) / SIZE
    want = torch.full_like(x, mean_weight if RANK == 0 else 0.0)
    torch.testing.assert_close(x.grad, want)
    # alltoall: the gradient goes back to the rank each row came from.
    rows = torch.ones(SIZE, 2, dtype=torch.float64).requires_grad_()
    (hvd.alltoall(rows) * (RANK + 1)).sum().backward()
    sent_to = torch.arange(1, SIZE + 1, dtype=torch.float64).reshape(SIZE, 1).expand(SIZE, 2)
    torch.testing.assert_close(rows.grad, sent_to)
    # reducescatter: the blocks' gradients gathered, times size() for Sum.
    for op, scale in ((hvd.Sum, SIZE), (hvd.Average, 1)):
        y = torch.ones(2 * SIZE, 3, dtype=torch.float64).requires_grad_()
        hvd.reducescatter(y, op=op).sum().backward()
        torch.testing.assert_close(y.grad, torch.full_like(y, float(scale)))
    # The grouped forms differentiate like the single ones.
    a = rows_of(RANK, torch.float64).requires_grad_()
    b = torch.ones(2 * SIZE, 1, dtype=torch.float64).requires_grad_()
    gathered, = hvd.grouped_allgather([a])
    block, = hvd.grouped_reducescatter([b], op=hvd.Sum)
    (gathered.sum() + block.sum()).backward()
    torch.testing.assert_close(a.grad, torch.ones_like(a))
    torch.testing.assert_close(b.grad, torch.full_like(b, float(SIZE)))


def test_objects():
    got = hvd.broadcast_object({"rank": RANK, "list": [RANK] * 3}, root_rank=0)
    assert got == {"rank": 0, "list": [0, 0, 0]}
    assert hvd.allgather_object(("r", RANK)) == [("r", r) for r in range(SIZE)]


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="complex64"):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(TypeError, match="torch.Tensor"):
        hvd.allreduce([1.0, 2.0])
    with pytest.raises(HorovodFeatureNotProvided, match="Adasum"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    with pytest.raises(HorovodFeatureNotProvided, match="process_set"):
        hvd.allreduce(torch.ones(2), process_set=object())
    with pytest.raises(HorovodFeatureNotProvided, match="SyncBatchNorm"):
        hvd.SyncBatchNorm(4)
    with pytest.raises(HorovodFeatureNotProvided, match="elastic"):
        hvd.elastic.State
    with pytest.raises(ValueError, match="prescale_factor"):
        hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Sum, prescale_factor=2.0)
    with pytest.raises(TypeError, match="op=hvd.Sum"):
        hvd.grouped_allreduce([torch.ones(2), torch.ones(2, dtype=torch.int32)])


@pytest.mark.skipif(SIZE < 2, reason="a mismatch needs two ranks")
def test_mismatched_shapes_fail_on_every_rank_and_the_engine_goes_on():
    with pytest.raises(hvd.HorovodInternalError):
        hvd.allreduce(torch.ones(3 + RANK), op=hvd.Sum, name="mismatch")
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(SIZE)] * 2


def test_join_ranks_out_of_data_add_zeros():
    # Rank r has r + 1 batches; the others join when out of data.
    results = []
    for step in range(RANK + 1):
        results.append(hvd.allreduce(torch.ones(2), op=hvd.Sum, name=f"join.step{step}"))
    last = hvd.join()
    assert last == SIZE - 1
    for step, out in enumerate(results):
        assert out.tolist() == [float(SIZE - step)] * 2
    hvd.barrier()
