"""pytest under mpiexec: every rank runs the same tests in the same order, so the
collectives in them match up; a failure on any rank fails mpiexec."""
import pytest


@pytest.fixture(scope="session")
def comm_info():
    import concord
    concord.init()
    return concord.rank(), concord.size()
