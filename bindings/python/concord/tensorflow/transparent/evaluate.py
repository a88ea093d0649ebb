"""Patch `evaluate`: inputs sharded, results over every rank
(concord.transparent.evaluate)."""
from __future__ import annotations

from concord.tensorflow.transparent import sharding
from concord.transparent.evaluate import patch_evaluate


def patch(p):
    def shard(x, y, sample_weight, batch_size):
        sharded = sharding.shard(p, x, y, sample_weight, batch_size, False)
        if sharded is None:
            return x, y, sample_weight, batch_size, False
        x, y, sample_weight, from_numpy = sharded
        return x, y, sample_weight, None if from_numpy else batch_size, True

    patch_evaluate(p, shard)
