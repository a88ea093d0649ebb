"""concord.transparent.nan's patch of a Keras without the batch hook it
patches: making the callback is an error that says why, undo() puts the class
back, and a job of one rank is left alone. Keras here is a stand-in: nothing is
imported and nothing communicated (the patched decision itself is checked
across ranks by tests/tensorflow/keras_cases.py and tests/keras_torch)."""
import types

import pytest

from concord.transparent.nan import agree_on_nan
from concord.transparent.patcher import Patcher


class HooklessTerminateOnNaN:
    """A TerminateOnNaN that inherits its batch hook instead of defining it."""

    def __init__(self, raise_error=False):
        self.raise_error = raise_error


def patcher(size):
    keras = types.SimpleNamespace(__version__="9.9", callbacks=types.SimpleNamespace(
        TerminateOnNaN=HooklessTerminateOnNaN))
    return Patcher(options=None, keras=keras, rank=0, size=size)


def test_a_callback_it_cannot_patch_is_refused_when_made():
    p = patcher(2)
    agree_on_nan(p)
    with pytest.raises(TypeError, match=r"keras 9\.9's TerminateOnNaN defines neither "
                                        r"on_batch_end nor on_train_batch_end"):
        HooklessTerminateOnNaN()
    p.undo("the explicit API")
    assert HooklessTerminateOnNaN(raise_error=True).raise_error


def test_one_rank_leaves_it_alone():
    agree_on_nan(patcher(1))
    assert not HooklessTerminateOnNaN().raise_error
