"""Helpers the transparent patches share: collective agreement through concord's
engine (rank 0's value, a barrier that names what it waits for), averaged
results, and model introspection."""
from __future__ import annotations

import itertools


def build_from_spec(model, spec):
    """Builds a model whose layers are not built yet (a subclassed model, say)
    from the input's element spec, symbolically, as Keras itself does under a
    distribution strategy: so its variables exist, and can be broadcast, before
    the first step. Without a strategy Keras builds in the first step, after
    on_train_begin. Best effort (Keras's private _symbolic_build): where it
    cannot, the broadcast waits for the end of the first step."""
    from concord.tensorflow import _model_built
    if _model_built(model):
        return
    build = getattr(model, "_symbolic_build", None)
    if build is None:
        return
    try:
        build(data_batch=spec)
    except Exception:  # noqa: BLE001  (Keras builds in the first step instead)
        pass


def average_result(result):
    """evaluate()'s scalar, list or dict, averaged over ranks (same structure);
    the same call order on every rank gives the same names."""
    from concord import size
    from concord.tensorflow import _average_over_ranks
    if size() == 1:
        return result
    name = f"concord.run/evaluate/{next(names)}"
    if isinstance(result, dict):
        keys = list(result)
        averaged = _average_over_ranks([float(result[k]) for k in keys], name)
        return {k: float(v) for k, v in zip(keys, averaged)}
    if isinstance(result, (list, tuple)):
        return [float(v) for v in _average_over_ranks([float(v) for v in result], name)]
    return float(_average_over_ranks([float(result)], name)[0])


def moving_statistics(model, keras):
    """The moving statistics of the model's trainable BatchNormalization layers."""
    from concord.tensorflow import _model_layers
    out = []
    for layer in _model_layers(model):
        if isinstance(layer, keras.layers.BatchNormalization) and layer.trainable:
            out += [layer.moving_mean, layer.moving_variance]
    return out


names = itertools.count()


def from_rank0(value, name):
    """Rank 0's integer `value` on every rank (every rank must call it)."""
    import numpy as np

    import concord
    return int(concord.broadcast(np.array([value], np.int64), 0, name=name)[0])


def wait_for_every_rank(what, failed=False):
    """A barrier through concord's engine: a rank that never arrives makes rank 0
    name this tensor in the engine's stall warning (CONCORD_STALL_WARNING_S).
    Returns whether any rank passed failed=True, so that all ranks take the same
    path after it."""
    import numpy as np

    import concord
    flag = np.array([1.0 if failed else 0.0], np.float32)
    total = concord.allreduce_async(
        flag, name=f"concord.run: {what} is collective, every rank must call it "
                   f"(#{next(names)})").wait()
    return bool(total[0] > 0)

