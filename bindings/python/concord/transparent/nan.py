"""Keras's TerminateOnNaN made to agree over ranks, on every backend.

Alone, it decides on this rank's share of the batch's loss: the rank whose
share held a bad sample stops, the others go on into the next step's gradient
exchange (or the epoch's metrics) and wait there for it until
CONCORD_STALL_TIMEOUT_S. Patched, it decides on the loss averaged over ranks,
which is NaN or inf when any rank's is, so every rank stops after the batch one
process stops after (or raises there, with raise_error=True). That is one
scalar exchanged per training batch, and only in a fit() that has the callback."""
from __future__ import annotations

import functools

from concord.transparent.collective import average_floats, names


def _hook(cls):
    """The batch hook TerminateOnNaN defines itself (Keras 3: on_batch_end,
    which Callback.on_train_batch_end calls), or None."""
    return next((h for h in ("on_batch_end", "on_train_batch_end") if h in cls.__dict__), None)


def agree_on_nan(p):
    """Patch keras.callbacks.TerminateOnNaN (p is the backend's Patcher; a job
    of one rank leaves it alone). Where this Keras's callback has no batch hook
    of its own, making one is an error instead: left alone, it would part the
    ranks."""
    if p.size == 1:
        return
    cls = getattr(p.keras.callbacks, "TerminateOnNaN", None)
    if cls is None:
        return
    hook = _hook(cls)
    if hook is None:
        version = getattr(p.keras, "__version__", "?")

        def refuse(callback, *args, **kwargs):
            raise TypeError(f"concord.run: keras {version}'s TerminateOnNaN defines neither "
                            "on_batch_end nor on_train_batch_end, so concordrun cannot make "
                            "its decision agree over ranks; a rank that stopped alone would "
                            "leave the others waiting (part 'fit')")

        p.set(cls, "__init__", refuse)
        return
    original = cls.__dict__[hook]

    @functools.wraps(original)
    def decide(callback, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None:
            agreed = average_floats([float(loss)], f"concord.run/terminate-on-nan/{next(names)}")
            logs = dict(logs, loss=agreed[0])
        return original(callback, batch, logs)

    p.set(cls, hook, decide)
