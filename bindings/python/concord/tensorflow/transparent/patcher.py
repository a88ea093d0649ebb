"""The transparent mode's state: the options, this rank, what was patched (so
that it can be undone when the script turns out to use the explicit API) and
what was said already."""
from __future__ import annotations

import importlib
import sys
import threading

from concord.tensorflow.transparent.options import PARTS

_MISSING = object()


class Patcher:
    def __init__(self, options):
        import keras
        import tensorflow as tf

        from concord import tensorflow as ctf

        self.keras, self.tf, self.ctf = keras, tf, ctf
        self.o = options
        self.rank, self.size = ctf.rank(), ctf.size()
        self._said = set()
        self._undo = []  # (owner, name, original or _MISSING), in patch order
        self.used = False  # a patched fit/evaluate ran
        self.local = threading.local()  # .saving: depth of nested saves in this thread
        self.fitting = 0  # fit() calls under way (in any thread: callbacks may run on others)

    def apply(self):
        """Every part not switched off (--no-PART), in PARTS's order."""
        for part in PARTS:
            if not getattr(self.o, f"no_{part}"):
                importlib.import_module(f"concord.tensorflow.transparent.{part}").patch(self)

    def set(self, owner, name, value):
        """owner.name = value, remembered so that undo() can put the original
        back (a class's own attribute; _MISSING where it inherited it)."""
        if isinstance(owner, type):
            original = owner.__dict__.get(name, _MISSING)
        else:
            original = getattr(owner, name, _MISSING)
        self._undo.append((owner, name, original))
        setattr(owner, name, value)

    def undo(self, what):
        """Undoes every patch: the script uses the explicit API (`what`), which
        averages and shards itself; the patches would do it a second time."""
        for owner, name, original in reversed(self._undo):
            if original is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._undo.clear()
        if self.used:
            raise RuntimeError(
                f"concord: the script uses {what} after training under concordrun's transparent "
                "mode began (fit or evaluate ran first): use the explicit API from the start "
                "(import it before training), or not at all")
        self.say_once("explicit", f"the script uses {what}: running it without the transparent "
                                  "patches (no input sharding, no gradient averaging, no I/O "
                                  "changes by concordrun)")

    def say_once(self, key, text):
        if key not in self._said and self.rank == 0:
            print(f"concord: {text}", file=sys.stderr)
        self._said.add(key)
