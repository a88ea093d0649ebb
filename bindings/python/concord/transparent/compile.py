"""Patch `compile`: jit_compile turned off, for the backend's reason
(p.jit_reason: concord's TensorFlow ops have no XLA kernel; torch.compile
would trace the gradient exchange)."""
from __future__ import annotations

import functools


def patch(p):
    keras = p.keras
    # Patched on the class that defines it (Keras's Trainer): Keras takes a
    # compile() that differs from Trainer.compile for a custom one and then
    # loads saved models uncompiled.
    owner = next(c for c in keras.Model.__mro__ if "compile" in c.__dict__)
    original = owner.__dict__["compile"]

    @functools.wraps(original)
    def compile(model, *args, **kwargs):
        wanted = kwargs.get("jit_compile", "auto")
        if wanted not in (False, None) and (wanted != "auto" or p.auto_jit):
            p.say_once("xla", f"jit_compile turned off: {p.jit_reason}")
        kwargs["jit_compile"] = False
        return original(model, *args, **kwargs)

    p.set(owner, "compile", compile)
