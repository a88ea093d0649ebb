"""Which samples a rank holds, and in which order it visits them each epoch.

The sharding rule is the transparent mode's (concord.tensorflow.run): "strided"
gives rank r the global samples r, r+N, r+2N, ..., so that the global batch k of
batch_size = b*N samples is, in one process and over N ranks alike, the samples
k*b*N .. (k+1)*b*N-1. "contiguous" gives every rank one block, the first
total % N ranks one sample more (the remainder goes to the lowest ranks).

Epochs: a rank's samples form "rows": local position j of every rank is row j.
Ranks hold ceil(total/N) or floor(total/N) rows; the rows every rank holds are
"full". A shuffle permutes the full rows with a permutation every rank draws
alike (numpy's default_rng([seed, epoch]).permutation(full_rows)); the partial
last row (total % N != 0) stays last. So every rank visits its own samples only,
the ranks agree on the global batch (the union of their batches), and that batch
changes every epoch.
"""
from __future__ import annotations

from typing import List

import numpy as np

MODES = ("strided", "contiguous")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"concord.data: shard must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def share(total: int, rank: int, size: int, mode: str) -> np.ndarray:
    """The global indices rank `rank` of `size` holds, ascending (int64)."""
    check_mode(mode)
    if mode == "strided":
        return np.arange(rank, total, size, dtype=np.int64)
    base, extra = divmod(total, size)
    start = rank * base + min(rank, extra)
    return np.arange(start, start + base + (1 if rank < extra else 0), dtype=np.int64)


def epoch_rows(full_rows: int, rows: int, seed, epoch: int) -> np.ndarray:
    """The order in which every rank visits its rows in `epoch`: the full rows
    permuted (seed None: in order), then the partial rows in order."""
    order = np.arange(rows, dtype=np.int64)
    if seed is not None:
        order[:full_rows] = np.random.default_rng([int(seed), int(epoch)]).permutation(full_rows)
    return order


def batches(local_rows: int, full_rows: int, rows: int, per_rank_batch: int, seed,
            epoch: int) -> List[np.ndarray]:
    """This rank's batches for one epoch: arrays of local positions. Every rank
    gets the same number of batches and none is empty: a last batch made only
    of partial rows (which some ranks lack) joins the batch before it."""
    if per_rank_batch < 1:
        raise ValueError("concord.data: the per-rank batch must be at least 1, "
                         f"not {per_rank_batch}")
    if full_rows < 1:
        raise ValueError("concord.data: some rank holds no sample (fewer samples than ranks); "
                         "use fewer ranks")
    order = epoch_rows(full_rows, rows, seed, epoch)
    chunks = [order[i:i + per_rank_batch] for i in range(0, rows, per_rank_batch)]
    while len(chunks) > 1 and chunks[-1].min() >= full_rows:
        chunks[-2:] = [np.concatenate(chunks[-2:])]
    return [c[c < local_rows] for c in chunks]
