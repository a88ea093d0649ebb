"""The transparent mode's batch rule (concord.transparent.batches), which the
torch backend applies in numpy: every global batch split by stride over the
ranks, none empty, the same number of steps everywhere, and each epoch's order
the same on every rank. No process is started and nothing is communicated."""
import numpy as np
import pytest

from concord.transparent.batches import epoch_order, rank_batch


def shares(n, batch, ranks):
    """The samples each rank takes: strided within every batch; a batch of k <
    ranks samples is shared (rank r takes its sample r mod k)."""
    out = [[] for _ in range(ranks)]
    for start in range(0, n, batch):
        k = min(batch, n - start)
        for r in range(ranks):
            out[r] += range(start + r % k, start + k, ranks)
    return out


@pytest.mark.parametrize("n,batch,ranks", [(129, 32, 2), (10, 4, 3), (7, 7, 4), (65, 16, 4)])
def test_every_batch_is_split_by_stride_and_none_is_empty(n, batch, ranks):
    order = epoch_order(n, None, 0)
    steps = -(-n // batch)
    per_rank = [[rank_batch(order, s, batch, r, ranks) for s in range(steps)]
                for r in range(ranks)]
    assert all(len(b) > 0 for batches in per_rank for b in batches)
    assert [[int(i) for b in batches for i in b] for batches in per_rank] == \
        [list(s) for s in shares(n, batch, ranks)]


def test_every_rank_draws_the_same_order_and_each_epoch_a_new_one():
    first = epoch_order(40, 123, 0)
    assert sorted(first) == list(range(40))
    np.testing.assert_array_equal(epoch_order(40, 123, 0), first)  # on any rank
    assert not np.array_equal(epoch_order(40, 123, 1), first)
    np.testing.assert_array_equal(epoch_order(5, None, 3), np.arange(5))
