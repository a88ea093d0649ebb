"""Horovod's Keras callbacks on concord (Keras 3)."""
from __future__ import annotations

import sys

import keras

from concord import tensorflow as _ctf
from concord.horovod import _basics


class BroadcastGlobalVariablesCallback(_ctf.BroadcastInitialWeights):
    """Broadcasts the model's and the optimizer's variables from root_rank, so
    every rank trains from the same state. Before the first step where the
    model is built then (Horovod: after the first batch), else after the first
    step, as Horovod does."""

    def __init__(self, root_rank=0, device=""):
        super().__init__(root_rank)


class MetricAverageCallback(_ctf.MetricAverage):
    """The epoch's metrics over ranks at the end of every epoch (so a callback
    after it, and rank 0's log, see the global values): Keras's own metrics
    from their state summed over ranks, others averaged (concord.tensorflow's
    MetricAverage)."""

    def __init__(self, device=""):
        super().__init__()


def _get_value(variable):
    return float(keras.ops.convert_to_numpy(variable))


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """learning rate = initial_lr * multiplier(epoch) for epochs in
    [start_epoch, end_epoch): set once per epoch (staircase) or every batch with
    a fractional epoch (staircase=False). multiplier is a number or a function
    of the epoch."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None, *args):
        super().__init__()
        if initial_lr is None:
            raise ValueError("concord.horovod: initial_lr is required (the learning rate the "
                             "multiplier scales)")
        self.initial_lr = float(initial_lr)
        self.start_epoch, self.end_epoch = start_epoch, end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        if not callable(multiplier):
            self.staircase = True
            constant = multiplier
            multiplier = lambda epoch: constant  # noqa: E731
        self.multiplier = multiplier

    def _steps(self):
        steps = (self.params or {}).get("steps")
        if steps:
            return steps
        raise ValueError(f"concord.horovod: {type(self).__name__} cannot tell the number of steps "
                         "per epoch (the data has no known length): give steps_per_epoch=")

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._steps()
        if self.momentum_correction and hasattr(self.model.optimizer, "momentum"):
            # Keras 3 optimizers hold momentum as a Python number, which the
            # compiled train step reads once: a change made by a callback would
            # not reach it, so it is not made (and the user is told once).
            if _basics.rank_unchecked() == 0 and not getattr(type(self), "_said", False):
                type(self)._said = True
                print("concord.horovod: momentum_correction is not applied: Keras 3 optimizers "
                      "keep momentum constant inside the compiled training step",
                      file=sys.stderr, flush=True)

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def _adjust(self, epoch):
        lr = self.model.optimizer.learning_rate
        if not hasattr(lr, "assign"):
            raise TypeError(f"concord.horovod: {type(self).__name__} sets the learning rate, but "
                            "the optimizer's is a schedule (a LearningRateSchedule)")
        lr.assign(self.initial_lr * self.multiplier(epoch))

    def on_train_batch_begin(self, batch, logs=None):
        epoch = self.current_epoch
        if epoch < self.start_epoch or (self.end_epoch is not None and epoch >= self.end_epoch):
            return
        if self.staircase:
            if batch == 0:
                self._adjust(epoch)
        else:
            self._adjust(epoch + float(batch) / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["lr"] = _get_value(self.model.optimizer.learning_rate)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Gradual warm-up (Goyal et al., 2017): the learning rate rises from
    initial_lr / size() to initial_lr over warmup_epochs, every batch."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            epoch += 1.0 / self.steps_per_epoch
            n = _basics.size()
            return 1.0 / n * (epoch * (n - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and _basics.rank_unchecked() == 0:
            lr = _get_value(self.model.optimizer.learning_rate)
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {lr:g}.")


class BestModelCheckpoint(keras.callbacks.ModelCheckpoint):
    """Saves the best model so far (save_best_only) to filepath, on rank 0 only.
    Horovod's takes its path from its Spark estimator; here filepath= is given."""

    def __init__(self, monitor="val_loss", verbose=0, mode="auto", save_freq="epoch",
                 filepath=None):
        if filepath is None:
            raise ValueError("concord.horovod: BestModelCheckpoint needs filepath= (Horovod's "
                             "Spark estimator, which set it, is not part of concord)")
        super().__init__(filepath=filepath, monitor=monitor, verbose=verbose,
                         save_best_only=True, save_weights_only=False, mode=mode,
                         save_freq=save_freq)

    def on_train_batch_end(self, batch, logs=None):
        if _basics.rank_unchecked() == 0:
            super().on_train_batch_end(batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if _basics.rank_unchecked() == 0:
            super().on_epoch_end(epoch, logs)
