"""Patch `optimizers`: every Keras optimizer's apply() averages the gradients
over ranks first, between Keras's loss.backward() and the update (one
all_reduce a step; --compression fp16: as float16; --accumulate K: summed
locally over K batches, then averaged in one exchange and one step). Where
Keras itself has DistributedDataParallel average them (keras-nightly), they
are not averaged again."""
from __future__ import annotations

import threading
import weakref

from concord.torch.transparent import exchange

_state = threading.local()  # .active: an apply() of ours is under way in this thread


def _exchanging_apply(p, original):
    """original apply() behind the exchange. Only the outermost optimizer
    exchanges (a LossScaleOptimizer's inner one then sees averaged gradients,
    and every rank agrees on whether the step is skipped)."""
    accumulators = weakref.WeakKeyDictionary()  # each optimizer its own sums

    def apply(self, grads, trainable_variables=None, *args, **kwargs):
        if getattr(_state, "active", False):
            return original(self, grads, trainable_variables, *args, **kwargs)
        _state.active = True
        try:
            grads = list(grads)
            if p.o.accumulate > 1:
                accumulator = accumulators.get(self)
                if accumulator is None:
                    accumulator = accumulators[self] = exchange.Accumulator(p.o.accumulate)
                if not accumulator.add(grads):
                    return None  # not the K-th pass: no step
                grads = accumulator.take()
            if self not in p.reduced_by_keras:
                variables = (trainable_variables if trainable_variables is not None
                             else self._trainable_variables)
                grads = exchange.average(grads, [v.value for v in variables], p.o.compression)
            return original(self, grads, trainable_variables, *args, **kwargs)
        finally:
            _state.active = False
    return apply


def _noting_keras_ddp(p, original):
    """make_train_function, which notes the model's optimizer when Keras has
    wrapped the model in DistributedDataParallel (keras-nightly does it there):
    DDP averages its gradients during backward, apply() must not again."""
    def make_train_function(model, *args, **kwargs):
        result = original(model, *args, **kwargs)
        if p.keras_reduces_gradients(model) and model.optimizer is not None:
            p.reduced_by_keras.add(model.optimizer)
            p.say_once("ddp", "Keras wraps the model in DistributedDataParallel itself: DDP "
                              "averages the gradients (over concord) and Keras the metrics; "
                              "concordrun does not average them again")
        return result
    return make_train_function


def patch(p):
    p.wrap_optimizers_apply(lambda original: _exchanging_apply(p, original))
    owner = next(c for c in p.keras.Model.__mro__ if "make_train_function" in c.__dict__)
    p.set(owner, "make_train_function",
          _noting_keras_ddp(p, owner.__dict__["make_train_function"]))
    if p.o.compression == "fp16":
        p.say_once("fp16", "gradients travel as float16 (--compression fp16)")
    if p.o.accumulate > 1:
        p.say_once("accumulate", f"{p.o.accumulate} backward passes per optimizer step "
                                 "(--accumulate): gradients averaged over them and the ranks")
