"""Where a script says it distributes itself. The transparent mode's runner
registers its undo here; the explicit APIs (concord.tensorflow's init,
DistributedOptimizer and tape, concord.horovod.*) report their first use, and
the patches are undone then: averaging or sharding twice would train a
different model. Light on purpose: both frameworks' modules import it."""
from __future__ import annotations

from typing import Callable, List

_undo_hooks: List[Callable[[str], None]] = []
_first_use: List[str] = []


def on_explicit_api(hook: Callable[[str], None]) -> None:
    """`hook(what)` runs when the script first uses the explicit API."""
    _undo_hooks.append(hook)


def explicit_api(what: str) -> None:
    """Records that the script uses the explicit API (`what`); the first time,
    runs the hooks (the transparent patches are undone)."""
    if _first_use:
        return
    _first_use.append(what)
    for hook in list(_undo_hooks):
        hook(what)
