"""What the transparent patches read of a Keras model, whatever its backend:
its layers, whether they are built, and the statistics each rank updates on
its own (BatchNormalization's moving mean and variance)."""
from __future__ import annotations


def model_layers(model):
    """The model and every layer inside it, nested ones included."""
    if hasattr(model, "_flatten_layers"):
        return list(model._flatten_layers())
    return [model] + list(model.layers)


def model_built(model):
    """Whether every layer of the model has its variables (a subclassed model
    is built by Keras in its first step unless built before)."""
    return all(layer.built for layer in model_layers(model))


def moving_statistics(model, keras):
    """The moving statistics of the model's trainable BatchNormalization layers."""
    out = []
    for layer in model_layers(model):
        if isinstance(layer, keras.layers.BatchNormalization) and layer.trainable:
            out += [layer.moving_mean, layer.moving_variance]
    return out


class MovingStatisticsAverage:
    """A Keras callback's schedule (mixed in before keras.callbacks.Callback):
    BatchNormalization's moving mean and variance, which each rank updates from
    its own share of the batches, averaged over ranks before validation and at
    the end of every epoch, so every rank then holds the same model (what rank
    0 saves is what every rank evaluates). Each backend's subclass averages
    them (average_variables)."""

    def on_epoch_begin(self, epoch, logs=None):
        self._stale = True

    def on_test_begin(self, logs=None):
        self._average_if_stale()

    def on_epoch_end(self, epoch, logs=None):
        self._average_if_stale()

    def _average_if_stale(self):
        if not getattr(self, "_stale", False):
            return
        self._stale = False
        import keras  # loaded already: a callback runs inside fit()
        variables = moving_statistics(self.model, keras)
        if variables:
            self.average_variables(variables)

    def average_variables(self, variables):
        raise NotImplementedError

