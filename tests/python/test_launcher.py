"""concordrun's command line (no processes are started)."""
import sys

import pytest

from concord.launcher import build_command


def test_passes_mpi_options_and_program():
    cmd = build_command(["-np", "3", "-genv", "OMP_NUM_THREADS", "1", "-ppn", "2", "python",
                         "train.py", "--epochs", "2"])
    assert cmd[:3] == ["mpiexec.mpich", "-n", "3"]
    assert cmd[3:8] == ["-genv", "OMP_NUM_THREADS", "1", "-ppn", "2"]
    assert cmd[8:] == [sys.executable, "train.py", "--epochs", "2"]


def test_double_dash_ends_options():
    assert build_command(["-n", "2", "--", "./prog", "-x"])[3:] == ["./prog", "-x"]


@pytest.mark.parametrize("argv, message", [
    (["python", "x.py"], "-np N"),
    (["-np", "two", "python"], "-np N"),
    (["-np", "2"], "no program"),
    (["-np", "2", "-genv", "A"], "needs 2 value"),
])
def test_bad_usage(argv, message):
    with pytest.raises(SystemExit, match=message):
        build_command(argv)
