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
