"""Keras 3 on its torch backend under concordrun: a single driver process that
starts the runs itself (never under mpiexec). Without torch, Keras or concord's
torch backend there is nothing to test: the files are not collected, pytest
exits with 5, which CTest reports as skipped. The test command sets
CONCORD_TEST_REQUIRE_TORCH, so there a missing one fails instead."""
import importlib.util
import os

_NEEDED = ("torch", "keras", "concord._torch")
_missing = [m for m in _NEEDED if importlib.util.find_spec(m) is None]
if _missing:
    if os.environ.get("CONCORD_TEST_REQUIRE_TORCH"):
        raise ImportError(f"tests/keras_torch: {', '.join(_missing)} not installed "
                          "(CONCORD_TEST_REQUIRE_TORCH is set)")
    print(f"tests/keras_torch: skipped, {', '.join(_missing)} not installed")
    collect_ignore_glob = ["test_*.py"]
