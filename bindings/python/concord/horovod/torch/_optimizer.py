"""Horovod's DistributedOptimizer for torch: the optimizer's class with the
gradient exchange added (step() waits for it), as in Horovod."""
from __future__ import annotations

import contextlib
import warnings

from concord.horovod import _basics
from concord.horovod.torch._exchange import GradientExchange, named_parameters_of
from concord.horovod.torch.compression import Compression


class _Exchanging:
    """Mixed in before the user's optimizer class (type() below): its methods
    run first and call the optimizer's own through super()."""

    def __init__(self, params, exchange: GradientExchange):
        super().__init__(params)
        self._exchange = exchange
        self._should_synchronize = True
        self._synchronized = False

    def synchronize(self):
        """Waits for every gradient's exchange (starting the ones backward did
        not); after it, the gradients are the averaged (or summed) ones."""
        self._exchange.synchronize()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside it does not synchronize: for scripts that called
        synchronize() themselves (to clip the averaged gradients, say)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("concord.horovod.torch: optimizer.step() after "
                              "optimizer.synchronize() exchanges the gradients again; use "
                              "`with optimizer.skip_synchronize(): optimizer.step()`")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._exchange.outstanding():
            raise AssertionError(
                "concord.horovod.torch: optimizer.zero_grad() between loss.backward() and "
                "optimizer.step() (or synchronize()): the gradients are being exchanged")
        return super().zero_grad(*args, **kwargs)

    def set_backward_passes_per_step(self, passes: int) -> None:
        self._exchange.set_passes(passes)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=_basics.Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=None):
    """An optimizer of the same class, param_groups and state as `optimizer`
    whose step() first averages (op=hvd.Sum: sums) every gradient over the
    ranks. Each gradient's allreduce starts as soon as backward has accumulated
    it, on the last of backward_passes_per_step passes."""
    _basics.check_process_set(process_set)
    _basics.require_init()
    if num_groups and groups is not None:
        warnings.warn("concord.horovod.torch: DistributedOptimizer got groups= and the older "
                      "num_groups=: using groups=, as Horovod does")
    named = named_parameters_of(optimizer.param_groups, named_parameters)
    exchange = GradientExchange(named, compression, backward_passes_per_step, op,
                                gradient_predivide_factor, groups if groups is not None
                                else num_groups, sparse_as_dense)
    cls = type(optimizer.__class__.__name__, (_Exchanging, optimizer.__class__), {})
    # The same param_groups dicts (Optimizer keeps the dicts it is given) and the
    # same state: a learning-rate scheduler or a GradScaler made on `optimizer`,
    # or state loaded into it from a checkpoint, act on the wrapped one too.
    wrapped = cls(optimizer.param_groups, exchange)
    wrapped.state = optimizer.state
    return wrapped
