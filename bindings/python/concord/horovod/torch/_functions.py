"""Horovod's torch helpers for the start of training: broadcast_parameters
and broadcast_optimizer_state."""
from __future__ import annotations

import torch

from concord.horovod import _basics, _objects
from concord.horovod.torch import _handles, _movement


def broadcast_parameters(params, root_rank, prefix=None, process_set=None) -> None:
    """Overwrites every rank's tensors with root_rank's: `params` is a
    state_dict (model.state_dict()) or (name, tensor) pairs
    (model.named_parameters()), the same names on every rank."""
    _basics.check_process_set(process_set)
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
        if any(not isinstance(x, tuple) or len(x) != 2 for x in items):
            raise ValueError(f"concord.horovod.torch: broadcast_parameters takes a state_dict or "
                             f"(name, tensor) pairs, not {type(params).__name__}")
    handles = []
    try:
        for name, p in items:
            if isinstance(p, torch.Tensor):
                tensor = p.data if isinstance(p, torch.nn.Parameter) else p
                full = f"{prefix}{name}" if prefix else str(name)
                handles.append(_movement.broadcast_async_(tensor, root_rank,
                                                          name=f"parameters/{full}"))
    finally:
        _handles.synchronize_all(handles)


def broadcast_optimizer_state(optimizer, root_rank, prefix="Parameter.", process_set=None):
    """root_rank's optimizer state (its state_dict: per-parameter state such as
    momentum buffers and step counts, and every param_group's settings such as
    the learning rate) loaded into every rank's optimizer."""
    _basics.check_process_set(process_set)
    # On the host: a GPU tensor would be unpickled onto root's device, which
    # another rank may not see; load_state_dict moves state to each parameter's.
    state = _objects.broadcast_object(_on_host(optimizer.state_dict()), root_rank,
                                      name=f"optimizer_state/{prefix}")
    if _basics.rank() != int(root_rank):
        _load_in_place(optimizer, state)


def _load_in_place(optimizer, state) -> None:
    """optimizer.load_state_dict(state), keeping the optimizer's param_group
    dicts and its state object: load_state_dict makes new ones, which would cut
    this rank off from a scheduler or the optimizer that DistributedOptimizer
    wrapped (they share those objects), while root, which loads nothing, keeps
    them. Horovod likewise sets root's values into the existing groups."""
    groups, kept = optimizer.param_groups, optimizer.state
    optimizer.load_state_dict(state)
    for old, new in zip(groups, optimizer.param_groups):
        old.clear()
        old.update(new)  # new["params"] is old's list: load_state_dict keeps it
    kept.clear()
    kept.update(optimizer.state)
    optimizer.param_groups = groups
    optimizer.state = kept


def _on_host(obj):
    """`obj` (a state_dict's nesting of dicts, lists and tuples) with its
    tensors copied to the host."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _on_host(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_on_host(v) for v in obj)
    return obj
