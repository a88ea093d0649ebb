"""Patch `evaluate` on either Keras backend: inputs sharded, results over
every rank (unless Keras reduced them itself: concord.transparent.metrics says
how), rank 0 alone printing. Each backend gives how it shards its inputs."""
from __future__ import annotations

import functools

from concord.transparent.collective import average_result
from concord.transparent.metrics import evaluate_logs


def patch_evaluate(p, shard, keras_averages=lambda model: False):
    """keras.Model.evaluate patched. shard(x, y, sample_weight, batch_size) gives
    this rank's (x, y, sample_weight, batch_size, sharded), sharded False where
    every rank takes the whole of the data (its results are then every rank's
    already); keras_averages(model) says whether Keras reduces the results over
    ranks itself."""
    original = p.keras.Model.evaluate

    @functools.wraps(original)
    def evaluate(model, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 **kwargs):
        p.used = True
        if kwargs.get("_use_cached_eval_dataset"):
            # fit()'s validation: its data is sharded already, and the val_
            # metrics are reduced with the epoch's logs.
            return original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                            sample_weight=sample_weight, **kwargs)
        x, y, sample_weight, batch_size, sharded = shard(x, y, sample_weight, batch_size)
        if p.rank != 0 and not p.o.no_io:
            verbose = 0
        flatten = getattr(model, "_flatten_metrics_in_order", None)
        if p.size == 1 or not sharded or flatten is None:
            result = original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                              sample_weight=sample_weight, **kwargs)
            return result if keras_averages(model) or not sharded else average_result(result)
        # As a dict, whose keys say which metric gave each value; then in the
        # form asked for, in Keras's own order.
        as_dict = kwargs.pop("return_dict", False)
        logs = original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                        sample_weight=sample_weight, return_dict=True, **kwargs)
        if not keras_averages(model):
            logs = evaluate_logs(model, logs)
        return logs if as_dict else flatten(logs)

    p.set(p.keras.Model, "evaluate", evaluate)
