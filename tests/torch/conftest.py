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


@pytest.fixture(scope="session")
def group():
    import concord.torch  # noqa: F401  (registers the backend, sets RANK etc.)
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("concord")
    yield dist.group.WORLD
    dist.destroy_process_group()
