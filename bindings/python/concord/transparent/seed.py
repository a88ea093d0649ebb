"""Patch `seed`: rank 0's random seed set on every rank before the script runs."""
from __future__ import annotations

import os

from concord.transparent.collective import from_rank0


def patch(p):
    """Rank 0's random seed on every rank, before the script runs: an
    unseeded ds.shuffle() (or np.random) then draws the same permutation
    everywhere, so the strided shards partition the data."""
    if p.size == 1:
        return
    mine = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
    seed = from_rank0(mine, "concord.run/seed")
    p.set_random_seed(seed)
    p.say_once("seed", f"random seed {seed} on every rank (keras.utils.set_random_seed; "
                       "a seed the script sets replaces it)")
