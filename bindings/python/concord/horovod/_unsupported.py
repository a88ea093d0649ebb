"""Horovod features concord does not provide: each raises an error naming the
feature and what to use instead, never a silent no-op."""
from __future__ import annotations

import types


class HorovodFeatureNotProvided(NotImplementedError):
    """A Horovod feature that concord does not provide."""


def fail(feature: str, hint: str = ""):
    raise HorovodFeatureNotProvided(
        f"concord.horovod: {feature} is not provided by concord" + (f"; {hint}" if hint else "")
        + " (docs/HOROVOD.md lists what is)")


def function(feature: str, hint: str = ""):
    """A stand-in for a Horovod function or class: calling it raises."""
    def unsupported(*args, **kwargs):
        fail(feature, hint)
    unsupported.__name__ = feature.split(".")[-1].split("(")[0]
    unsupported.__doc__ = "Not provided by concord: calling it raises HorovodFeatureNotProvided."
    return unsupported


class UnsupportedModule(types.ModuleType):
    """A Horovod submodule concord does not provide (hvd.elastic): any name taken
    from it raises."""

    def __init__(self, name: str, feature: str, hint: str = ""):
        super().__init__(name)
        self._feature, self._hint = feature, hint

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        fail(f"{self._feature} ({self.__name__}.{attr})", self._hint)


ELASTIC_HINT = ("elastic training (hvd.elastic, run_elastic, hvd.elastic.State) needs ranks to "
                "join and leave a running job; concord's jobs have a fixed set of ranks: restart "
                "from a checkpoint instead (keras.callbacks.BackupAndRestore)")
ADASUM_HINT = "use op=hvd.Average or hvd.Sum"
PROCESS_SET_HINT = ("every collective runs over all ranks (the global process set); "
                    "process sets are not built")


def elastic_module(name: str) -> UnsupportedModule:
    return UnsupportedModule(name, "elastic training", ELASTIC_HINT)
