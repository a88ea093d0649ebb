"""Patch `evaluate`: inputs sharded, results over every rank
(concord.transparent.evaluate), unless Keras reduced them itself:
keras-nightly under DDP."""
from __future__ import annotations

from concord.torch.transparent import inputs
from concord.transparent.evaluate import patch_evaluate


def patch(p):
    def shard(x, y, sample_weight, batch_size):
        p.refuse_keras_distribution()
        if p.size == 1:
            return x, y, sample_weight, batch_size, False
        x = inputs.shard(p, x, y, sample_weight, batch_size, False, "evaluate()'s x")
        return x, None, None, None, True

    patch_evaluate(p, shard, p.keras_reduces)
