"""Patch `compile`: jit_compile turned off (concord's ops have no XLA kernel)."""
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
        if kwargs.get("jit_compile", "auto") not in (False, None):
            p.say_once("xla", "jit_compile turned off: concord's ops have no XLA kernel")
        kwargs["jit_compile"] = False
        return original(model, *args, **kwargs)

    p.set(owner, "compile", compile)
