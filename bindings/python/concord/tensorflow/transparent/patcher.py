"""The transparent mode's state on TensorFlow: concord.transparent.patcher's,
with TensorFlow and concord.tensorflow at hand for the patches."""
from __future__ import annotations

from concord.transparent import patcher as _patcher
from concord.tensorflow.transparent.options import PARTS

_HERE = "concord.tensorflow.transparent"
_SHARED = ("compile", "io", "seed")  # patched alike on every backend: concord.transparent


class Patcher(_patcher.Patcher):
    MODULES = {part: f"concord.transparent.{part}" if part in _SHARED else f"{_HERE}.{part}"
               for part in PARTS}
    jit_reason = "concord's ops have no XLA kernel"

    def __init__(self, options):
        import keras
        import tensorflow as tf

        from concord import tensorflow as ctf

        super().__init__(options, keras, ctf.rank(), ctf.size())
        self.tf, self.ctf = tf, ctf
