"""Patch `fit`: inputs sharded (inputs), rank 0's model and optimizer state
broadcast before the first step, epoch metrics and BatchNormalization's moving
statistics averaged over ranks (callbacks), TerminateOnNaN deciding on every
rank's loss (concord.transparent.nan)."""
from __future__ import annotations

import functools

from concord.torch.transparent import inputs
from concord.torch.transparent.callbacks import (
    AverageLogs, AverageMovingStatistics, BroadcastState)
from concord.transparent.nan import agree_on_nan


def patch(p):
    original = p.keras.Model.fit

    @functools.wraps(original)
    def fit(model, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, sample_weight=None,
            **kwargs):
        p.used = True
        p.refuse_keras_distribution()
        # The averages before the script's callbacks (which then log them), the
        # broadcast after theirs (a BackupAndRestore restores on rank 0).
        callbacks = [AverageLogs(p), AverageMovingStatistics()] + list(callbacks or []) + \
            [BroadcastState()]
        if p.size > 1:
            x, validation_data = inputs.shard_fit(p, x, y, sample_weight, batch_size, shuffle,
                                                  validation_split, validation_data, kwargs)
            y = sample_weight = batch_size = None
            shuffle, validation_split = False, 0.0
        if p.rank != 0 and not p.o.no_io:
            verbose = 0
        return original(model, x=x, y=y, batch_size=batch_size, epochs=epochs,
                        verbose=verbose, callbacks=callbacks,
                        validation_split=validation_split, validation_data=validation_data,
                        shuffle=shuffle, sample_weight=sample_weight, **kwargs)

    p.set(p.keras.Model, "fit", fit)
    agree_on_nan(p)
