"""concordrun's command line (no processes are started)."""
import sys

import pytest

from concord.launcher import build_command


def test_passes_mpi_options_and_program():
    cmd = build_command(["-np", "3", "-genv", "OMP_NUM_THREADS", "1", "-ppn", "2", "python",
                         "train.py", "--epochs", "2"], tensorflow=False)
    assert cmd[:3] == ["mpiexec.mpich", "-n", "3"]
    assert cmd[3:8] == ["-genv", "OMP_NUM_THREADS", "1", "-ppn", "2"]
    assert cmd[8:] == [sys.executable, "train.py", "--epochs", "2"]


def test_python_scripts_run_through_the_tensorflow_runner(monkeypatch):
    import concord.launcher as launcher
    monkeypatch.setattr(launcher, "_has_tensorflow", lambda: True)
    cmd = build_command(["-np", "2", "python", "train.py", "-x"])
    assert cmd[3:] == [sys.executable, "-m", "concord.tensorflow.run", "train.py", "-x"]
    assert build_command(["-np", "2", "--no-tensorflow", "python", "t.py"])[3:] == \
        [sys.executable, "t.py"]
    assert build_command(["-np", "2", "python", "-c", "pass"])[3:] == [sys.executable, "-c", "pass"]


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
