"""Patch `fit`: inputs sharded, the model's and optimizer's state broadcast from
rank 0 before the first step, epoch metrics made global (MetricAverage) and
BatchNormalization's moving statistics averaged over ranks, TerminateOnNaN
deciding on every rank's loss (concord.transparent.nan)."""
from __future__ import annotations

import functools

from concord.tensorflow.transparent import sharding
from concord.tensorflow.transparent.common import build_from_spec
from concord.transparent.arrays import numpy_inputs, split_arrays
from concord.transparent.collective import from_rank0, names
from concord.transparent.models import MovingStatisticsAverage
from concord.transparent.nan import agree_on_nan


def _broadcast_state_callback(ctf):
    class BroadcastState(ctf.BroadcastInitialWeights):
        """Rank 0's variables and epoch to start from, after every other
        callback's on_train_begin (a BackupAndRestore runs on rank 0 only)."""

        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)
            epoch = getattr(self.model, "_initial_epoch", None)
            got = from_rank0(-1 if epoch is None else int(epoch),
                             f"concord.run/epoch/{next(names)}")
            self.model._initial_epoch = None if got < 0 else got

    return BroadcastState


def _moving_statistics_callback(ctf, keras, tf):
    class AverageMovingStatistics(MovingStatisticsAverage, keras.callbacks.Callback):
        """BatchNormalization's moving statistics averaged over ranks
        (MovingStatisticsAverage says when), as one group of the engine's."""

        def average_variables(self, variables):
            labels = [f"concord.run/moving/{i}/{getattr(v, 'path', v.name)}"
                      for i, v in enumerate(variables)]
            averaged = ctf.grouped_allreduce(
                [tf.convert_to_tensor(v) for v in variables], op="avg",
                names=[n.replace(":", "_") for n in labels])
            for v, a in zip(variables, averaged):
                v.assign(a)

    return AverageMovingStatistics


def _shard_inputs(p, model, x, y, sample_weight, batch_size, shuffle, validation_split,
                  validation_data, kwargs, metrics):
    """fit()'s inputs (and validation data) sharded over ranks; the arguments
    fit() then takes, kwargs updated in place, and metrics (MetricAverage) told
    which data every rank takes whole."""
    if (validation_split and validation_data is None
            and numpy_inputs(x, y, sample_weight)):
        (x, y, sample_weight), validation_data = split_arrays(
            (x, y, sample_weight), validation_split)
        validation_split = 0.0
    vbatch = kwargs.get("validation_batch_size") or batch_size
    sharded = sharding.shard(p, x, y, sample_weight, batch_size, shuffle)
    if sharded is not None:
        x, y, sample_weight, from_numpy = sharded
        if from_numpy:
            # The dataset shuffles, with the same seed on every rank.
            shuffle, batch_size = False, None
    validation_whole = False
    if validation_data is not None:
        v = sharding.shard_validation(p, validation_data, vbatch)
        validation_whole = v is None
        if v is not None:
            validation_data = v
            kwargs.pop("validation_batch_size", None)
        elif batch_size is None and vbatch is not None:
            # Left alone, it keeps the script's batch size (not
            # Keras's default, which batch_size=None would give).
            kwargs.setdefault("validation_batch_size", vbatch)
    metrics.whole = (sharded is None, validation_whole)
    if isinstance(x, p.tf.data.Dataset):
        build_from_spec(model, x.element_spec)
    return x, y, sample_weight, batch_size, shuffle, validation_split, validation_data


def patch(p):
    ctf, keras = p.ctf, p.keras
    original = keras.Model.fit
    BroadcastState = _broadcast_state_callback(ctf)
    AverageMovingStatistics = _moving_statistics_callback(ctf, keras, p.tf)

    @functools.wraps(original)
    def fit(model, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, sample_weight=None,
            **kwargs):
        p.used = True
        metrics = ctf.MetricAverage()
        callbacks = [metrics, AverageMovingStatistics()] + list(callbacks or []) + \
            [BroadcastState()]
        if p.size > 1:
            x, y, sample_weight, batch_size, shuffle, validation_split, validation_data = \
                _shard_inputs(p, model, x, y, sample_weight, batch_size, shuffle,
                              validation_split, validation_data, kwargs, metrics)
        if p.rank != 0 and not p.o.no_io:
            verbose = 0
        return original(model, x=x, y=y, batch_size=batch_size, epochs=epochs,
                        verbose=verbose, callbacks=callbacks,
                        validation_split=validation_split, validation_data=validation_data,
                        shuffle=shuffle, sample_weight=sample_weight, **kwargs)

    p.set(keras.Model, "fit", fit)
    agree_on_nan(p)
