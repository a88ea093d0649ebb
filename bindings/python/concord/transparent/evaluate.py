"""Patch `evaluate` on either Keras backend: inputs sharded, results averaged
over ranks (unless Keras averaged them itself), rank 0 alone printing. Each
backend gives how it shards its inputs."""
from __future__ import annotations

import functools

from concord.transparent.collective import average_result


def patch_evaluate(p, shard, keras_averages=lambda model: False):
    """keras.Model.evaluate patched. shard(x, y, sample_weight, batch_size) gives
    this rank's (x, y, sample_weight, batch_size); keras_averages(model) says
    whether Keras averages the results over ranks itself."""
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
        x, y, sample_weight, batch_size = shard(x, y, sample_weight, batch_size)
        if p.rank != 0 and not p.o.no_io:
            verbose = 0
        result = original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                          sample_weight=sample_weight, **kwargs)
        return result if keras_averages(model) else average_result(result)

    p.set(p.keras.Model, "evaluate", evaluate)
