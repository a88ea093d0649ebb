"""Patch `io`: rank 0 alone writes and prints; saving is collective outside fit()."""
from __future__ import annotations

import functools
import os
import sys

from concord.transparent.collective import wait_for_every_rank


def _collective_write(p, fn, what):
    """fn (a save) made collective: rank 0 writes, then every rank waits for
    it. Inside fit() rank 0 writes alone (its writer callbacks run on rank 0
    only); nested calls (Model.save -> saving.save_model) write once."""
    local = p.local

    @functools.wraps(fn)
    def write(*args, **kwargs):
        depth = getattr(local, "saving", 0)
        if depth or p.fitting:
            return fn(*args, **kwargs) if p.rank == 0 else None
        if p.rank != 0:
            if wait_for_every_rank(what):
                # Rank 0's write raised: raise here too, so that a script
                # that catches it goes on the same way on every rank.
                raise RuntimeError(f"concord: {what} failed on rank 0 (its error says why)")
            return None
        local.saving = depth + 1
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            local.saving = depth
            wait_for_every_rank(what, failed=True)
            raise
        local.saving = depth
        wait_for_every_rank(what)
        return result

    write._concord_collective = True
    return write


def _patch_saving(p):
    import importlib
    keras = p.keras
    for cls, name in ((keras.Model, "save"), (keras.Model, "save_weights"),
                      (keras.Model, "export")):
        fn = getattr(cls, name, None)
        if fn is not None and not getattr(fn, "_concord_collective", False):
            p.set(cls, name, _collective_write(p, fn, f"Model.{name}"))
    modules = [keras.saving, keras.models]
    try:
        modules.append(importlib.import_module("keras.src.saving.saving_api"))
    except ImportError:  # pragma: no cover - another Keras layout
        pass
    wrapped = {}
    for module in modules:
        for name in ("save_model", "save_weights"):
            fn = getattr(module, name, None)
            if fn is None or getattr(fn, "_concord_collective", False):
                continue
            if fn not in wrapped:
                wrapped[fn] = _collective_write(p, fn, f"keras.saving.{name}")
            p.set(module, name, wrapped[fn])


def patch(p):
    keras = p.keras
    if p.size > 1:
        _patch_saving(p)
    writers = tuple(getattr(keras.callbacks, n) for n in
                    ("ModelCheckpoint", "TensorBoard", "CSVLogger", "BackupAndRestore")
                    if hasattr(keras.callbacks, n))
    original_fit = keras.Model.fit

    @functools.wraps(original_fit)
    def fit(model, *args, callbacks=None, **kwargs):
        if p.rank != 0:
            callbacks = [c for c in (callbacks or []) if not isinstance(c, writers)]
        p.fitting += 1
        try:
            result = original_fit(model, *args, callbacks=callbacks, **kwargs)
        finally:
            p.fitting -= 1
        if p.size > 1 and not p.fitting:
            # What rank 0's callbacks wrote is complete on every rank.
            wait_for_every_rank("fit")
        return result

    p.set(keras.Model, "fit", fit)
    if p.rank != 0:
        p.set(sys, "stdout", open(os.devnull, "w"))

