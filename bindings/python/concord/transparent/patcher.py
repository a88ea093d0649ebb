"""The transparent mode's state, whatever Keras's backend: the options, this
rank, what was patched (so that it can be undone when the script turns out to
distribute itself) and what was said already. Each backend's Patcher names its
parts' modules (MODULES) and adds what its patches need."""
from __future__ import annotations

import importlib
import sys
import threading

_MISSING = object()


def _optimizer_classes(base):
    classes, todo = set(), [base]
    while todo:
        cls = todo.pop()
        if cls not in classes:
            classes.add(cls)
            todo.extend(cls.__subclasses__())
    return classes


class Patcher:
    # part -> the module whose patch(p) patches it, in the order they are patched
    MODULES: dict = {}
    # Why compile() turns jit_compile off on this backend (concord.transparent.compile).
    jit_reason = ""
    # Whether jit_compile="auto" compiles on this backend (then turning it off is said).
    auto_jit = True

    def __init__(self, options, keras, rank, size):
        self.keras = keras
        self.o = options
        self.rank, self.size = rank, size
        self._said = set()
        self._undo = []  # (owner, name, original or _MISSING), in patch order
        self.used = False  # a patched fit/evaluate ran
        self.local = threading.local()  # .saving: depth of nested saves in this thread
        self.fitting = 0  # fit() calls under way (in any thread: callbacks may run on others)

    def apply(self):
        """Every part not switched off (--no-PART), in MODULES's order."""
        for part, module in self.MODULES.items():
            if not getattr(self.o, f"no_{part}"):
                importlib.import_module(module).patch(self)

    def set(self, owner, name, value):
        """owner.name = value, remembered so that undo() can put the original
        back (a class's own attribute; _MISSING where it inherited it)."""
        if isinstance(owner, type):
            original = owner.__dict__.get(name, _MISSING)
        else:
            original = getattr(owner, name, _MISSING)
        self._undo.append((owner, name, original))
        setattr(owner, name, value)

    def wrap_optimizers_apply(self, wrap):
        """Every Keras optimizer class's own apply() replaced by wrap(original)
        (the base class's too where it inherits apply() from above it)."""
        base = self.keras.optimizers.Optimizer
        for cls in _optimizer_classes(base):
            if "apply" in cls.__dict__:
                self.set(cls, "apply", wrap(cls.__dict__["apply"]))
        if "apply" not in base.__dict__:
            self.set(base, "apply", wrap(base.apply))

    def set_random_seed(self, seed):
        """Python's, numpy's, the backend's and Keras's seeds (the seed part)."""
        self.keras.utils.set_random_seed(seed)

    def undo(self, what):
        """Undoes every patch: the script uses {what} (the explicit API), which
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
