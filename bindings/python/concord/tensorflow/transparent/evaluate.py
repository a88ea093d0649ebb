"""Patch `evaluate`: inputs sharded, results averaged over ranks."""
from __future__ import annotations

import functools

from concord.tensorflow.transparent import sharding
from concord.transparent.collective import average_result


def patch(p):
    keras = p.keras
    original = keras.Model.evaluate

    @functools.wraps(original)
    def evaluate(model, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 **kwargs):
        p.used = True
        if kwargs.get("_use_cached_eval_dataset"):
            # fit()'s validation: its data is sharded already, and the val_
            # metrics are averaged with the epoch's logs.
            return original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                            sample_weight=sample_weight, **kwargs)
        sharded = sharding.shard(p, x, y, sample_weight, batch_size, False)
        if sharded is not None:
            x, y, sample_weight, from_numpy = sharded
            if from_numpy:
                batch_size = None
        if p.rank != 0 and not p.o.no_io:
            verbose = 0
        result = original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                          sample_weight=sample_weight, **kwargs)
        return average_result(result)

    p.set(keras.Model, "evaluate", evaluate)
