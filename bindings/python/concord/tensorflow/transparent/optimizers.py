"""Patch `optimizers`: every Keras optimizer's apply() averages gradients over
ranks first (--compression fp16: as float16; --accumulate K: summed locally
over K batches, then averaged in one exchange and one step)."""
from __future__ import annotations

import weakref


def _exchanging_apply(p, original):
    """original apply() behind the exchange. Only the outermost optimizer
    exchanges (a LossScaleOptimizer's inner one then sees averaged gradients,
    and every rank agrees on whether the step is skipped)."""
    from concord.tensorflow import _averaging, _exchange
    from concord.tensorflow.compression import Compression
    reducer = _exchange.GradientReducer(
        "avg", Compression.fp16 if p.o.compression == "fp16" else Compression.none)
    accumulators = weakref.WeakKeyDictionary()  # each optimizer its own sums

    def apply(self, grads, trainable_variables=None, *args, **kwargs):
        if getattr(_averaging, "active", False):
            return original(self, grads, trainable_variables, *args, **kwargs)
        _averaging.active = True
        try:
            variables = list(trainable_variables if trainable_variables is not None
                             else self._trainable_variables)
            accumulator = None
            if p.o.accumulate > 1:
                accumulator = accumulators.get(self)
                if accumulator is None:
                    accumulator = accumulators[self] = _exchange.Accumulator(p.o.accumulate, True)
            return _exchange.apply_with_exchange(self, original, reducer, accumulator, grads,
                                                 variables, *args, **kwargs)
        finally:
            _averaging.active = False
    return apply


def patch(p):
    p.wrap_optimizers_apply(lambda original: _exchanging_apply(p, original))
    if p.o.compression == "fp16":
        p.say_once("fp16", "gradients travel as float16 (--compression fp16)")
    if p.o.accumulate > 1:
        p.say_once("accumulate", f"{p.o.accumulate} backward passes per optimizer step "
                                 "(--accumulate): gradients averaged over them and the ranks")
