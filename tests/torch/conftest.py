"""pytest under mpiexec for the torch backend: every rank runs the same tests in
the same order, so their collectives match up; a failure on any rank fails
mpiexec. One process group ("concord") for the whole session."""
import os

import pytest

# Without torch, or a concord package built without its backend, there is
# nothing to test: the files are not collected, pytest exits with 5, which CTest
# reports as skipped. The test command sets CONCORD_TEST_REQUIRE_TORCH, so
# there the missing backend fails instead.
try:
    import torch  # noqa: F401
    import concord._torch  # noqa: F401
except ImportError as missing:
    if os.environ.get("CONCORD_TEST_REQUIRE_TORCH"):
        raise
    print(f"tests/torch: skipped, the concord PyTorch backend is not installed ({missing})")
    collect_ignore_glob = ["test_*.py"]


# Longer than any one test takes at 3 ranks on 2 cores (under 30 s), with its
# fixtures (the session's group at the first test and the last), and far
# shorter than CTest's limit for the whole file: a test that hangs ends the
# process with every thread's traceback, naming the test, and mpiexec ends the
# other ranks.
WATCHDOG_S = 180


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import faulthandler

    # To the real stderr, taken here between tests: during one, pytest captures
    # it, and what it captured is lost when the watchdog ends the process.
    with os.fdopen(os.dup(2), "w") as stderr:
        faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=stderr)
        yield
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def group():
    import concord.torch  # noqa: F401  (registers the backend, sets RANK etc.)
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("concord")
    yield dist.group.WORLD
    dist.destroy_process_group()


def concord_group(direct, **kwargs):
    """A concord group whose CPU allreduces take the direct path or, with
    direct=False, the engine (CONCORD_TORCH_DIRECT, read as the group is made)."""
    import torch.distributed as dist

    before = os.environ.get("CONCORD_TORCH_DIRECT")
    os.environ["CONCORD_TORCH_DIRECT"] = "1" if direct else "0"
    try:
        return dist.new_group(backend="concord", **kwargs)
    finally:
        if before is None:
            del os.environ["CONCORD_TORCH_DIRECT"]
        else:
            os.environ["CONCORD_TORCH_DIRECT"] = before


@pytest.fixture
def make_group(group):
    """concord_group, for tests: make_group(direct=..., timeout=...)."""
    return concord_group


@pytest.fixture(scope="module")
def engine_group(group):
    """A group whose allreduces take the engine (the default group's go direct)."""
    g = concord_group(direct=False)
    yield g
    import torch.distributed as dist

    dist.destroy_process_group(g)


@pytest.fixture(params=["direct", "engine"])
def path(request):
    """The group argument of a call on either path."""
    return None if request.param == "direct" else request.getfixturevalue("engine_group")
