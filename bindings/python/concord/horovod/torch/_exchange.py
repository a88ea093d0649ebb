"""The gradient exchange behind DistributedOptimizer: a hook on every
parameter starts its gradient's allreduce as soon as backward has accumulated
it (the last of `backward_passes_per_step` passes), so communication overlaps
the rest of backward; synchronize() waits for all of them."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import torch

from concord.horovod import _basics
from concord.horovod.torch import _allreduce, _handles, _movement

Param = torch.nn.Parameter


def _scales(op, predivide: float) -> Tuple[str, float, float]:
    """(concord op, prescale, postscale) for Horovod's op and
    gradient_predivide_factor: Average divides by the factor before the sum and
    by size()/factor after (the engine's Average divides by size())."""
    name = _basics.op_name(op)  # unknown ops and Adasum raise there
    if name not in ("avg", "sum"):
        raise ValueError("concord.horovod.torch: DistributedOptimizer's op must be hvd.Average "
                         f"or hvd.Sum, not {op!r}")
    if name == "sum":
        if predivide != 1.0:
            raise ValueError("concord.horovod.torch: gradient_predivide_factor needs "
                             "op=hvd.Average")
        return "sum", 1.0, 1.0
    if predivide <= 0:
        raise ValueError(f"concord.horovod.torch: gradient_predivide_factor must be positive, "
                         f"not {predivide}")
    return "avg", 1.0 / predivide, predivide


def _group_list(params: List[Param], groups) -> List[List[Param]]:
    """Horovod's `groups`: an int (that many groups of consecutive parameters)
    or lists of parameters; parameters in no list go alone."""
    if groups is None or groups == 0:
        return [[p] for p in params]
    if isinstance(groups, bool):
        raise TypeError("concord.horovod.torch: groups is an int (how many groups) or lists of "
                        f"parameters, not {groups!r}")
    if isinstance(groups, int):
        if groups < 0:
            raise ValueError(f"concord.horovod.torch: groups={groups} must not be negative")
        n = min(groups, len(params)) or 1
        bounds = [round(i * len(params) / n) for i in range(n + 1)]
        return [params[bounds[i]:bounds[i + 1]] for i in range(n) if bounds[i] < bounds[i + 1]]
    listed: List[List[Param]] = []
    seen = set()
    known = {id(p) for p in params}
    for group in groups:
        members = list(group)
        for p in members:
            if id(p) not in known:
                raise ValueError("concord.horovod.torch: groups lists a parameter that is not "
                                 "in the optimizer's param_groups, or does not require grad")
            if id(p) in seen:
                raise ValueError("concord.horovod.torch: a parameter is in more than one group")
            seen.add(id(p))
        if members:
            listed.append(members)
    return listed + [[p] for p in params if id(p) not in seen]


class GradientExchange:
    def __init__(self, named: Sequence[Tuple[str, Param]], compression, backward_passes_per_step,
                 op, gradient_predivide_factor, groups, sparse_as_dense):
        self.names: Dict[int, str] = {id(p): n for n, p in named}
        self.params = [p for _, p in named if p.requires_grad]
        self.compression = compression
        self.op, self.prescale, self.postscale = _scales(op, gradient_predivide_factor)
        self.sparse_as_dense = sparse_as_dense
        self.set_passes(backward_passes_per_step)
        self.groups = _group_list(self.params, groups)
        self.group_of: Dict[int, int] = {id(p): g for g, ps in enumerate(self.groups) for p in ps}
        self.ready: Dict[int, set] = {}
        # id(param) -> (Horovod handle, what to do with its result)
        self.pending: Dict[int, Tuple[int, object]] = {}
        self.started_groups: set = set()
        self.hooks = [p.register_post_accumulate_grad_hook(self._on_grad) for p in self.params]

    def set_passes(self, passes: int) -> None:
        if not isinstance(passes, int) or passes < 1:
            raise ValueError(f"concord.horovod.torch: backward_passes_per_step must be a "
                             f"positive int, not {passes!r}")
        self.passes = passes
        self.delay = {id(p): passes for p in getattr(self, "params", [])}

    def outstanding(self) -> bool:
        return bool(self.pending)

    def _on_grad(self, p: Param) -> None:
        key = id(p)
        if key in self.pending or self.delay[key] <= 0:
            raise AssertionError(
                "concord.horovod.torch: gradients were computed more than "
                f"backward_passes_per_step={self.passes} times before optimizer.step(); "
                "raise backward_passes_per_step to accumulate gradients locally")
        self.delay[key] -= 1
        if self.delay[key] == 0:
            g = self.group_of[key]
            self.ready.setdefault(g, set()).add(key)
            if len(self.ready[g]) == len(self.groups[g]):
                self._start_group(g)

    def _start_group(self, g: int) -> None:
        self.started_groups.add(g)
        dense = []
        for p in self.groups[g]:
            if p.grad is None:
                # No gradient on this rank (a branch it did not take): the
                # other ranks still wait for this tensor, so send zeros.
                p.grad = torch.zeros_like(p)
            if p.grad.is_sparse and not self.sparse_as_dense:
                self.pending[id(p)] = (self._start_sparse(p), None)
            else:
                if p.grad.is_sparse:
                    p.grad = p.grad.to_dense()
                dense.append(p)
        if dense:
            self._start_dense(dense)

    def _start_dense(self, params: List[Param]) -> None:
        sent, contexts = [], []
        for p in params:
            tensor, ctx = self.compression.compress(p.grad)
            sent.append(tensor)
            contexts.append(ctx)
        names = [f"allreduce.{self.names[id(p)]}" for p in params]
        handle = _allreduce.launch(sent, [_handles.op_name("grad", n) for n in names], self.op,
                                   self.prescale, self.postscale, True,
                                   "DistributedOptimizer", single=False)
        for i, p in enumerate(params):
            self.pending[id(p)] = (handle, (i, sent[i], contexts[i]))

    def _start_sparse(self, p: Param) -> int:
        grad = p.grad.coalesce()
        name = _handles.op_name("grad", f"sparse.{self.names[id(p)]}")
        parts = ((grad.indices().t().contiguous(), ".indices"), (grad.values(), ".values"))
        return _handles.register(_movement.combined(
            _movement.allgather_part(t, name + suffix, "DistributedOptimizer")
            for t, suffix in parts))

    def synchronize(self) -> None:
        """Starts what backward did not (parameters without a gradient this
        step, or fewer passes than backward_passes_per_step), then waits for
        every exchange and puts the results into the gradients. If one failed,
        every other is still waited for and the exchange starts afresh at the
        next backward; the first error is raised."""
        try:
            for g in range(len(self.groups)):
                if g not in self.started_groups:
                    self._start_group(g)
            self._wait_and_place()
        finally:
            self.pending.clear()
            self.ready.clear()
            self.started_groups.clear()
            self.delay = {id(p): self.passes for p in self.params}

    def _wait_and_place(self) -> None:
        results: Dict[int, object] = {}
        first_error = None
        for p in self.params:
            if id(p) not in self.pending:
                continue
            handle, place = self.pending[id(p)]
            if handle not in results:
                try:
                    results[handle] = _handles.synchronize(handle)
                except Exception as error:  # noqa: BLE001 (raised below, once all are waited for)
                    results[handle] = error
                    first_error = first_error or error
            if not isinstance(results[handle], Exception):
                self._place(p, results[handle], place)
        if first_error is not None:
            raise first_error

    def _place(self, p: Param, result, place) -> None:
        with torch.no_grad():
            if place is None:  # sparse: gathered indices and values
                indices, values = result
                if self.op == "avg":
                    values = values / _basics.size()
                p.grad = torch.sparse_coo_tensor(indices.t(), values, p.grad.shape,
                                                 check_invariants=True)
                return
            i, sent, ctx = place
            reduced = self.compression.decompress(result[i], ctx)
            if reduced is not p.grad:
                p.grad.copy_(reduced)

    def remove_hooks(self) -> None:
        for h in self.hooks:
            h.remove()
        self.hooks = []


def named_parameters_of(param_groups, named_parameters) -> List[Tuple[str, Param]]:
    """Every parameter of the optimizer with its exchange name: the given
    names (each unique, every parameter named), or Horovod's `noname.i` in
    param_groups order when none are given."""
    params = [p for group in param_groups for p in group["params"]]
    if named_parameters is None:
        return [(f"noname.{i}", p) for i, p in enumerate(params)]
    named = list(named_parameters)
    if any(not isinstance(x, tuple) or len(x) != 2 for x in named):
        raise ValueError("concord.horovod.torch: named_parameters must be (name, parameter) "
                         "pairs, as model.named_parameters() gives")
    names = [n for n, _ in named]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"concord.horovod.torch: named_parameters has duplicate names: "
                         f"{', '.join(duplicates)}")
    by_id = {id(p): n for n, p in named}
    unnamed = [i for i, p in enumerate(params) if id(p) not in by_id]
    if unnamed:
        raise ValueError(f"concord.horovod.torch: named_parameters was given, but "
                         f"{len(unnamed)} of the optimizer's parameters have no name in it "
                         f"(positions {unnamed[:5]} in param_groups)")
    return [(by_id[id(p)], p) for p in params]

