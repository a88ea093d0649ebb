"""The callbacks the torch transparent mode adds to fit(): rank 0's state
broadcast before the first step, the epoch's metrics over every rank, and
BatchNormalization's moving statistics averaged so that every rank holds the
same model. p is the Patcher."""
from __future__ import annotations

import keras

from concord.torch.transparent import exchange
from concord.transparent.collective import from_rank0, names
from concord.transparent.metrics import GlobalMetrics
from concord.transparent.models import MovingStatisticsAverage


class BroadcastState(keras.callbacks.Callback):
    """Rank 0's variables (the model's and the optimizer's) and epoch to start
    from, on every rank, after every other callback's on_train_begin (a
    BackupAndRestore runs on rank 0 only). It has no batch hooks, so Keras may
    still dispatch those of the others asynchronously."""

    def on_train_begin(self, logs=None):
        # Keras's torch trainer builds the model (or fails) before this.
        epoch = getattr(self.model, "_initial_epoch", None)
        got = from_rank0(-1 if epoch is None else int(epoch), f"concord.run/epoch/{next(names)}")
        self.model._initial_epoch = None if got < 0 else got
        model, optimizer = self.model, self.model.optimizer
        variables = list(model.variables)
        if optimizer is not None:
            if not optimizer.built:
                optimizer.build(model.trainable_variables)
            variables += list(optimizer.variables)
        exchange.broadcast_variables(variables)


class AverageLogs(GlobalMetrics, keras.callbacks.Callback):
    """The epoch's metrics (and val_ metrics) over every rank, so that every
    rank, rank 0's progress output and History report the global values
    (concord.transparent.metrics: Keras's own metrics from their summed state,
    others averaged), unless Keras reduced them itself: keras-nightly under DDP."""

    def __init__(self, p):
        super().__init__()
        self._p = p

    def reduces(self, model):
        return self._p.size > 1 and not self._p.keras_reduces(model)


class AverageMovingStatistics(MovingStatisticsAverage, keras.callbacks.Callback):
    """BatchNormalization's moving statistics averaged over ranks
    (MovingStatisticsAverage says when), in one all_reduce per dtype."""

    def average_variables(self, variables):
        values = [v.value for v in variables]
        for v, a in zip(variables, exchange.average(values, values)):
            v.assign(a)
