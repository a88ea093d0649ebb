"""The transparent mode's command line (python -m concord.tensorflow.run [options]
script args...): concord.transparent.options with this backend's parts."""
from __future__ import annotations

from concord.transparent import options as _options

# The parts that can be switched off (--no-PART), in the order they are patched.
PARTS = ("optimizers", "fit", "evaluate", "compile", "io", "seed")


def parse(argv, doc):
    return _options.parse(argv, doc, "python -m concord.tensorflow.run", PARTS)
