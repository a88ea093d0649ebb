"""Patch `evaluate`: inputs sharded, results averaged over ranks (unless Keras
averaged them itself: keras-nightly under DDP)."""
from __future__ import annotations

import functools

from concord.torch.transparent import inputs
from concord.transparent.collective import average_result


def patch(p):
    original = p.keras.Model.evaluate

    @functools.wraps(original)
    def evaluate(model, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 **kwargs):
        p.used = True
        if kwargs.get("_use_cached_eval_dataset"):
            # fit()'s validation: its data is sharded already, and the val_
            # metrics are averaged with the epoch's logs.
            return original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                            sample_weight=sample_weight, **kwargs)
        p.refuse_keras_distribution()
        if p.size > 1:
            x = inputs.shard(p, x, y, sample_weight, batch_size, False, "evaluate()'s x")
            y = sample_weight = batch_size = None
        if p.rank != 0 and not p.o.no_io:
            verbose = 0
        result = original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                          sample_weight=sample_weight, **kwargs)
        return result if p.keras_reduces(model) else average_result(result)

    p.set(p.keras.Model, "evaluate", evaluate)
