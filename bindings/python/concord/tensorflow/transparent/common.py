"""What only the TensorFlow patches need of a model (the rest, the same on
every backend, is concord.transparent's: collective, models)."""
from __future__ import annotations


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
