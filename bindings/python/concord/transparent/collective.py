"""What the transparent patches agree on through concord's engine, whatever
Keras's backend: rank 0's value, a barrier that names what it waits for, and
values summed or averaged over ranks. Every rank must make the same calls in
the same order (the names count them). They go through the engine, not the
blocking collectives: a rank that left training early then ends in
CONCORD_STALL_TIMEOUT_S, naming what it waited for, not in a wait with no end."""
from __future__ import annotations

import itertools

names = itertools.count()


def from_rank0(value, name):
    """Rank 0's integer `value` on every rank (every rank must call it)."""
    import numpy as np

    import concord
    return int(concord.broadcast(np.array([value], np.int64), 0, name=name)[0])


def wait_for_every_rank(what, failed=False):
    """A barrier through concord's engine: a rank that never arrives makes rank 0
    name this tensor in the engine's stall warning (CONCORD_STALL_WARNING_S).
    Returns whether any rank passed failed=True, so that all ranks take the same
    path after it."""
    import numpy as np

    import concord
    flag = np.array([1.0 if failed else 0.0], np.float32)
    total = concord.allreduce_async(
        flag, name=f"concord.run: {what} is collective, every rank must call it "
                   f"(#{next(names)})").wait()
    return bool(total[0] > 0)


def _floats_over_ranks(values, name, op):
    """A float64 vector reduced over ranks with `op` (a numpy array)."""
    import numpy as np

    import concord
    return concord.allreduce_async(np.asarray(values, dtype=np.float64), op=op,
                                   name=name).wait()


def average_floats(values, name):
    """A list of floats averaged over ranks (as float64)."""
    return [float(v) for v in _floats_over_ranks(values, name, "avg")]


def sum_floats(values, name):
    """A float64 vector summed over ranks (a numpy array)."""
    return _floats_over_ranks(values, name, "sum")


def average_result(result):
    """evaluate()'s scalar, list or dict, averaged over ranks (same structure)."""
    import concord
    if concord.size() == 1:
        return result
    name = f"concord.run/evaluate/{next(names)}"
    if isinstance(result, dict):
        keys = list(result)
        return dict(zip(keys, average_floats([float(result[k]) for k in keys], name)))
    if isinstance(result, (list, tuple)):
        return average_floats([float(v) for v in result], name)
    return average_floats([float(result)], name)[0]


def average_logs(logs, epoch):
    """An epoch's logs (its scalar metrics and val_ metrics) averaged over
    ranks, in place: what the progress bar, History and the callbacks after
    this one report."""
    import numpy as np

    import concord
    if not logs or concord.size() == 1:
        return logs
    keys = sorted(k for k, v in logs.items() if np.ndim(v) == 0)
    averaged = average_floats([float(logs[k]) for k in keys],
                              f"concord.run/metrics/{epoch}/{next(names)}")
    logs.update(zip(keys, averaged))
    return logs
