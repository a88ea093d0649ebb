"""concordrun's command line (no processes are started), and how it runs mpiexec."""
import os
import shutil
import sys

import pytest

from concord.launcher import build_command, mpiexec_command


@pytest.fixture(autouse=True)
def keras_on_tensorflow(monkeypatch):
    """Which runner a Python script gets depends on the backend Keras would
    pick: TensorFlow here, unless a test says otherwise."""
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")


def test_passes_mpi_options_and_program(monkeypatch):
    # Hydra's spelling, whatever MPI this is built with (Open MPI's gets -x: see
    # test_environment_options_in_the_launchers_spelling).
    monkeypatch.setenv("CONCORD_MPIEXEC", "mpiexec.mpich")
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    cmd = build_command(["-np", "3", "-genv", "OMP_NUM_THREADS", "1", "-ppn", "2", "python",
                         "train.py", "--epochs", "2"], tensorflow=False)
    assert cmd[:3] == mpiexec_command() + ["-n", "3"]
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


@pytest.mark.parametrize("program, expected", [
    # interpreter options before the script are kept, in front of the runner
    (["python3", "-u", "-W", "error", "train.py", "-x"],
     [sys.executable, "-u", "-W", "error", "-m", "concord.tensorflow.run", "train.py", "-x"]),
    # a versioned name or a venv's interpreter is recognised; a path is kept
    (["/venv/bin/python3.11", "train.py"],
     ["/venv/bin/python3.11", "-m", "concord.tensorflow.run", "train.py"]),
    (["python3.11", "-X", "dev", "train.py"],
     ["python3.11", "-X", "dev", "-m", "concord.tensorflow.run", "train.py"]),
    # python -m pkg.train runs the module through the runner
    (["python", "-m", "pkg.train", "--epochs", "2"],
     [sys.executable, "-m", "concord.tensorflow.run", "-m", "pkg.train", "--epochs", "2"]),
    # -c and non-Python programs run as given
    (["python3", "-c", "pass"], [sys.executable, "-c", "pass"]),
    (["./train.sh", "a.py"], ["./train.sh", "a.py"]),
])
def test_python_programs_are_recognised(monkeypatch, program, expected):
    import concord.launcher as launcher
    monkeypatch.setattr(launcher, "_has_tensorflow", lambda: True)
    assert build_command(["-np", "2"] + program)[3:] == expected


TF_RUN = [sys.executable, "-m", "concord.tensorflow.run"]


def test_python_through_env_or_a_shebang_is_recognised(tmp_path, monkeypatch):
    """`env python t.py` and a script whose #! names python run through the transparent
    mode as `python t.py` does, instead of on all the data on every rank, unnoticed."""
    import concord.launcher as launcher
    monkeypatch.setattr(launcher, "_has_tensorflow", lambda: True)

    def run(*program):
        return build_command(["-np", "2", *program])[3:]
    assert run("env", "python", "t.py", "-x") == ["env"] + TF_RUN + ["t.py", "-x"]
    assert run("/usr/bin/env", "-u", "A", "B=1", "python3", "-u", "t.py") == \
        ["/usr/bin/env", "-u", "A", "B=1", sys.executable, "-u"] + TF_RUN[1:] + ["t.py"]
    assert run("env", "B=1", "./prog") == ["env", "B=1", "./prog"]  # not python: as given
    for shebang, interpreter in [("#!/usr/bin/env python3", [sys.executable]),
                                 ("#!/usr/bin/env -S python3 -u", [sys.executable, "-u"]),
                                 ("#!/opt/venv/bin/python3.11", ["/opt/venv/bin/python3.11"])]:
        script = tmp_path / "train.py"
        script.write_text(f"{shebang}\nprint('hi')\n")
        assert run(str(script), "--epochs", "2") == \
            interpreter + TF_RUN[1:] + [str(script), "--epochs", "2"], shebang
    shell = tmp_path / "train.sh"
    shell.write_text("#!/bin/sh\npython train.py\n")
    assert run(str(shell)) == [str(shell)]  # a shell script: as given


@pytest.mark.parametrize("program, expected", [
    # "--" ends python's options: the next word is the script, whatever it looks like
    (["python", "--", "x.py", "-a"], TF_RUN + ["x.py", "-a"]),
    (["python", "-u", "--", "-x.py"], [sys.executable, "-u"] + TF_RUN[1:] + ["--", "-x.py"]),
    # combined one-letter options; -W/-X values attached or in the next word
    (["python", "-uB", "t.py"], [sys.executable, "-uB"] + TF_RUN[1:] + ["t.py"]),
    (["python", "-uWerror", "-Xdev", "t.py", "-W"],
     [sys.executable, "-uWerror", "-Xdev"] + TF_RUN[1:] + ["t.py", "-W"]),
    (["python", "-uW", "error", "t.py"], [sys.executable, "-uW", "error"] + TF_RUN[1:] + ["t.py"]),
    # a long option with a value
    (["python", "--check-hash-based-pycs", "always", "t.py"],
     [sys.executable, "--check-hash-based-pycs", "always"] + TF_RUN[1:] + ["t.py"]),
    # -m ends the options, its module attached or not, after other options too
    (["python", "-um", "pkg.train", "-x"], [sys.executable, "-u"] + TF_RUN[1:] +
     ["-m", "pkg.train", "-x"]),
    (["python", "-mpkg.train", "-c"], TF_RUN + ["-m", "pkg.train", "-c"]),
    # -c CODE (however spelt), -, and an interactive python run as given
    (["python", "-uc", "print(1)", "x.py"], [sys.executable, "-uc", "print(1)", "x.py"]),
    (["python", "-ucpass"], [sys.executable, "-ucpass"]),
    (["python", "-", "a"], [sys.executable, "-", "a"]),
    (["python", "-u"], [sys.executable, "-u"]),
    (["python", "--"], [sys.executable, "--"]),
])
def test_python_option_grammar(monkeypatch, program, expected):
    import concord.launcher as launcher
    monkeypatch.setattr(launcher, "_has_tensorflow", lambda: True)
    assert build_command(["-np", "2"] + program)[3:] == expected


@pytest.mark.parametrize("options", [
    [], ["-u"], ["-uB"], ["-W", "error"], ["-Werror", "-Xdev"], ["-uWignore"], ["-X", "dev", "-u"],
    ["--check-hash-based-pycs", "never"], ["--"], ["-u", "--"], ["-E", "-s", "--"],
])
def test_the_script_and_its_arguments_are_those_python_takes(tmp_path, options):
    """CPython itself is the reference: what the launcher takes as the script and
    its arguments is what python runs and puts in sys.argv."""
    import json
    import subprocess
    from concord.launcher import _python_words
    script = tmp_path / "-x.py" if "--" in options else tmp_path / "x.py"
    script.write_text("import json, sys; print(json.dumps(sys.argv))")
    words = options + [str(script), "-c", "-m", "--", "a"]
    ran = subprocess.run([sys.executable] + words, capture_output=True, text=True, check=True)
    argv = json.loads(ran.stdout)
    kept, kind, target, args = _python_words(words)
    assert (kind, kept + [target] + args) == ("script", words[:len(kept)] + argv)
    assert [target] + args == argv


def test_transparent_options_need_a_script_or_module(monkeypatch):
    import concord.launcher as launcher
    monkeypatch.setattr(launcher, "_has_tensorflow", lambda: True)
    for program in (["python", "-uc", "pass"], ["python", "-"], ["python"]):
        with pytest.raises(SystemExit, match="not -c, -, or an interactive python"):
            build_command(["-np", "2", "--accumulate", "2"] + program)
    cmd = build_command(["-np", "2", "--accumulate", "2", "python", "-u", "-m", "pkg.t", "-x"])
    assert cmd[3:] == [sys.executable, "-u"] + TF_RUN[1:] + ["--accumulate", "2", "-m", "pkg.t",
                                                               "-x"]


def test_hydra_output_patterns_take_a_value():
    cmd = build_command(["-np", "2", "-outfile-pattern", "o.%r", "python", "t.py"],
                        tensorflow=False)
    assert cmd[3:] == ["-outfile-pattern", "o.%r", sys.executable, "t.py"]


def test_runner_takes_a_module(tmp_path, monkeypatch):
    from concord.tensorflow.run import __doc__ as doc
    from concord.tensorflow.transparent.options import parse

    def _parse(argv):
        return parse(argv, doc)
    o = _parse(["--no-seed", "-m", "pkg.train", "--epochs", "2", "-v"])
    assert (o.module, o.args, o.no_seed, o.script) == ("pkg.train", ["--epochs", "2", "-v"], True,
                                                        None)
    o = _parse(["train.py", "-m", "x"])
    assert (o.module, o.script, o.args) == (None, "train.py", ["-m", "x"])
    # Options with a value before -m; "--" before a script; the program's own
    # words, a "--" among them, as they are.
    o = _parse(["--accumulate", "2", "--compression", "fp16", "-m", "pkg.train", "x"])
    assert (o.module, o.args, o.accumulate, o.compression) == ("pkg.train", ["x"], 2, "fp16")
    o = _parse(["--accumulate", "3", "--", "-x.py", "--", "-m", "y"])
    assert (o.module, o.script, o.args, o.accumulate) == (None, "-x.py", ["--", "-m", "y"], 3)
    o = _parse(["t.py", "--", "z"])
    assert (o.script, o.args) == ("t.py", ["--", "z"])
    with pytest.raises(SystemExit):
        _parse(["--no-seed"])


@pytest.fixture
def hydra(monkeypatch):
    monkeypatch.setenv("CONCORD_MPIEXEC", "mpiexec.mpich")


@pytest.fixture
def open_mpi(monkeypatch):
    monkeypatch.setenv("CONCORD_MPIEXEC", "mpiexec.openmpi")
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)


@pytest.mark.parametrize("option", ["-hosts", "-host", "-H"])
def test_host_lists_become_hydra_hosts(option, hydra):
    cmd = build_command(["-np", "4", option, "node1:2, node2:2", "./prog"])
    assert cmd[3:] == ["-hosts", "node1:2,node2:2", "./prog"]
    cmd = build_command(["-np", "3", option, "a,b.example.org,198.18.0.3", "./prog"])
    assert cmd[3:5] == ["-hosts", "a,b.example.org,198.18.0.3"]


@pytest.mark.parametrize("hosts, message", [
    ("a,,b", "empty host name"),
    ("a:0", "at least 1"),
    ("a:two", "not a host or host:slots"),
    ("a b", "not a host or host:slots"),
])
def test_bad_host_lists(hosts, message, hydra):
    with pytest.raises(SystemExit, match=message):
        build_command(["-np", "2", "-hosts", hosts, "./prog"])


def test_hostfile_is_checked_and_passed(tmp_path, hydra):
    f = tmp_path / "hosts"
    f.write_text("# the nodes\nnode1:2\n\nnode2  # second\n")
    assert build_command(["-np", "3", "-f", str(f), "./p"])[3:] == ["-f", str(f), "./p"]
    f.write_text("node1:2\nnode2:x\n")
    with pytest.raises(SystemExit, match="line 2: 'node2:x'"):
        build_command(["-np", "3", "-f", str(f), "./p"])
    f.write_text("# nothing\n")
    with pytest.raises(SystemExit, match="lists no host"):
        build_command(["-np", "3", "-hostfile", str(f), "./p"])
    with pytest.raises(SystemExit, match="cannot read it"):
        build_command(["-np", "3", "-f", str(tmp_path / "missing"), "./p"])


@pytest.mark.parametrize("launcher, spelling", [("mpiexec.mpich", "-hosts"),
                                                ("mpiexec.openmpi", "--host")])
def test_hostfiles_in_open_mpi_syntax(tmp_path, monkeypatch, launcher, spelling):
    """"host slots=N" lines (Open MPI's and horovodrun's hostfiles; `mpirun --hostfile`
    gives such a host N slots) are read as host:N, for either launcher; Hydra, which
    reads no such line, gets them as a host list."""
    monkeypatch.setenv("CONCORD_MPIEXEC", launcher)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    f = tmp_path / "hosts"
    f.write_text("node1 slots=2\nnode2   slots=2  # second\n\nnode3:1\nnode4\n")
    for option in ("-f", "-hostfile", "-machinefile"):
        cmd = build_command(["-np", "6", option, str(f), "./p"])
        assert cmd == [launcher, "-n", "6", spelling, "node1:2,node2:2,node3:1,node4", "./p"]
    for line, message in [("node1 slots=0", "has 0 slots"), ("node1 slots=x", "not a host"),
                          ("node1 slots=", "not a host"), ("node1:2 slots=2", "not a host"),
                          ("node1 max_slots=4", "not a host"), ("node1 node2", "not a host"),
                          ("node1 slots=2 slots=3", "not a host")]:
        f.write_text(f"node0\n{line}\n")
        with pytest.raises(SystemExit, match="line 2: .*" + message):
            build_command(["-np", "2", "-f", str(f), "./p"])


@pytest.mark.parametrize("options", [
    # Open MPI's (mpirun --help all: "-N <arg0>", "-timeout|--timeout <arg0>", ...)
    ["-N", "1"], ["--timeout", "60"], ["--cpus-per-proc", "2"], ["-npersocket", "1"],
    ["--gmca", "btl", "self"], ["-tune", "t.conf"],
    # Hydra's, which reads --name as -name and -name=value
    ["--ppn", "1"], ["-membind", "core"], ["-order-nodes", "ascending"], ["-outfile", "o.%r"],
    ["--genv", "A", "1"], ["-ppn=1"], ["-genv=A", "1"],
])
def test_options_with_values_are_not_taken_for_the_program(monkeypatch, options):
    """The word after an option that takes a value is that value: the program is what
    follows, so a Python script still runs through the transparent mode."""
    import concord.launcher as launcher
    monkeypatch.setattr(launcher, "_has_tensorflow", lambda: True)
    monkeypatch.setenv("CONCORD_MPIEXEC", "mpiexec.mpich")  # whatever MPI this is built with
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    cmd = build_command(["-np", "2"] + options + ["python", "t.py", "-x"])
    assert cmd[3:] == options + TF_RUN + ["t.py", "-x"]


@pytest.mark.parametrize("options, hydra, open_mpi", [
    (["-genv", "OMP_NUM_THREADS", "1"], ["-genv", "OMP_NUM_THREADS", "1"],
     ["-x", "OMP_NUM_THREADS=1"]),
    (["--genv", "A", "x y"], ["--genv", "A", "x y"], ["-x", "A=x y"]),
    (["-genv=A", "1"], ["-genv=A", "1"], ["-x", "A=1"]),
    (["-genvlist", "A,B"], ["-genvlist", "A,B"], ["-x", "A", "-x", "B"]),
    (["-x", "A=1"], ["-genv", "A", "1"], ["-x", "A=1"]),
    (["-x", "A=b=c"], ["-genv", "A", "b=c"], ["-x", "A=b=c"]),
    (["-x", "LD_LIBRARY_PATH"], ["-genvlist", "LD_LIBRARY_PATH"], ["-x", "LD_LIBRARY_PATH"]),
])
def test_environment_options_in_the_launchers_spelling(monkeypatch, options, hydra, open_mpi):
    """Each launcher refuses the other's environment option (Open MPI: unknown option
    "-genv"; Hydra: unrecognized argument x): written in its own, as host lists are."""
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    for launcher, expected in (("mpiexec.mpich", hydra), ("mpiexec.openmpi", open_mpi)):
        monkeypatch.setenv("CONCORD_MPIEXEC", launcher)
        cmd = build_command(["-np", "2"] + options + ["./p", "-x"])
        assert cmd == [launcher, "-n", "2"] + expected + ["./p", "-x"]
    monkeypatch.setenv("CONCORD_MPIEXEC", "mpiexec.mpich")
    with pytest.raises(SystemExit, match="expected -x NAME or -x NAME=VALUE"):
        build_command(["-np", "2", "-x", "=1", "./p"])


def test_every_value_option_of_open_mpi_is_known():
    """Open MPI's own list: every option its help shows with <arg0>."""
    import re
    import shutil
    import subprocess
    from concord.launcher import _VALUED
    mpirun = shutil.which("mpiexec.openmpi")
    if mpirun is None:
        pytest.skip("Open MPI's launcher is not installed")
    help_text = subprocess.run([mpirun, "--allow-run-as-root", "--help", "all"],
                               capture_output=True, text=True, timeout=60).stdout
    listed = re.findall(r"^\s*(-\S+) <arg0>( <arg1>)?", help_text, re.M)
    assert len(listed) > 30
    for spellings, second in listed:
        names = {word.lstrip("-") for word in spellings.split("|")}
        if names & {"n", "np", "h", "help"}:  # concordrun's own -np; --help takes no value
            continue
        for name in names:
            assert _VALUED.get(name) == (2 if second else 1), spellings


@pytest.mark.parametrize("option", ["-hostlist", "-machine", "-machines", "-machinelist"])
def test_hydra_host_list_synonyms_are_host_lists(option, hydra):
    assert build_command(["-np", "2", option, "a, b", "./p"])[3:] == ["-hosts", "a,b", "./p"]
    with pytest.raises(SystemExit, match="empty host name"):
        build_command(["-np", "2", option, "a,,b", "./p"])


@pytest.mark.parametrize("spelling", [["--np", "3"], ["--n", "3"], ["-np=3"], ["-n=3"]])
def test_the_ranks_in_the_launchers_other_spellings(spelling):
    assert build_command(spelling + ["./p"])[len(mpiexec_command()):] == ["-n", "3", "./p"]


@pytest.mark.parametrize("launcher", ["mpiexec.mpich", "mpiexec.openmpi"])
@pytest.mark.parametrize("first, second", [("-H", "-f"), ("-hosts", "-hosts"), ("-f", "-H"),
                                           ("-hostfile", "-machinefile")])
def test_hosts_given_twice_are_an_error(tmp_path, monkeypatch, launcher, first, second):
    """Hydra itself refuses a second host list or hostfile ('duplicate host file or host
    list setting'); Open MPI adds a second --host's slots to the first's, so the same
    command would run elsewhere, or with other slots, there: both are refused first."""
    monkeypatch.setenv("CONCORD_MPIEXEC", launcher)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    f = tmp_path / "hosts"
    f.write_text("node1:2\n")

    def value(option):
        return str(f) if option in ("-f", "-hostfile", "-machinefile") else "node1:2"
    with pytest.raises(SystemExit, match=f"{second} gives the hosts again \\(after {first}\\)"):
        build_command(["-np", "2", first, value(first), second, value(second), "./p"])


@pytest.mark.parametrize("launcher", ["mpiexec.mpich", "mpiexec.openmpi"])
def test_every_spelling_of_a_host_option_is_checked_and_counted(tmp_path, monkeypatch,
                                                                launcher):
    """--host and --hostfile (Open MPI's own spellings, which Hydra reads too) and
    -name=value went to the launcher unchecked: --host a:2 --host a:2 ran with 4
    slots on a under Open MPI, a bad entry failed on the remote side or not at all."""
    monkeypatch.setenv("CONCORD_MPIEXEC", launcher)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    hosts = ["--host", "node1:2,node2"] if launcher.endswith("openmpi") else \
        ["-hosts", "node1:2,node2"]
    for spelling in (["--host", "node1:2, node2"], ["-hosts=node1:2,node2"],
                     ["--hosts", "node1:2,node2"]):
        assert build_command(["-np", "3"] + spelling + ["./p"])[-3:] == hosts + ["./p"]
    f = tmp_path / "hosts"
    f.write_text("node1 slots=2\nnode2\n")  # Open MPI's syntax: a host list on either
    for spelling in (["--hostfile", str(f)], [f"--machinefile={str(f)}"]):
        assert build_command(["-np", "3"] + spelling + ["./p"])[-3:] == hosts + ["./p"]
    with pytest.raises(SystemExit, match="empty host name"):
        build_command(["-np", "2", "--host", "a,,b", "./p"])
    with pytest.raises(SystemExit, match="'a:x' is not a host or host:slots"):
        build_command(["-np", "2", "-hosts=a:x", "./p"])
    with pytest.raises(SystemExit, match="cannot read it"):
        build_command(["-np", "2", "--hostfile", str(tmp_path / "missing"), "./p"])
    with pytest.raises(SystemExit, match="--host gives the hosts again \\(after --host\\)"):
        build_command(["-np", "2", "--host", "a:2", "--host", "a:2", "./p"])


def test_launcher_exec_takes_a_value(hydra):
    cmd = build_command(["-np", "2", "-launcher", "ssh", "-launcher-exec", "/x/netns-exec",
                         "./p"])
    assert cmd[3:] == ["-launcher", "ssh", "-launcher-exec", "/x/netns-exec", "./p"]


def test_launcher_of_the_mpi_concord_was_built_with(monkeypatch):
    from concord import _mpi_build
    monkeypatch.delenv("CONCORD_MPIEXEC", raising=False)
    assert mpiexec_command() == [_mpi_build.MPIEXEC]
    expected = {"MPICH": "mpiexec.mpich", "OpenMPI": "mpiexec.openmpi"}.get(_mpi_build.MPI_FLAVOR)
    if expected:
        assert _mpi_build.MPIEXEC.endswith(expected)


def test_mpiexec_override_takes_arguments(monkeypatch):
    monkeypatch.setenv("CONCORD_MPIEXEC", "mpiexec.openmpi --oversubscribe")
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    cmd = build_command(["-np", "2", "-x", "A=1", "./prog"], tensorflow=False)
    assert cmd == ["mpiexec.openmpi", "--oversubscribe", "-n", "2", "-x", "A=1", "./prog"]


@pytest.mark.parametrize("option", ["-hosts", "-H"])
def test_host_lists_in_open_mpi_spelling(option, open_mpi, tmp_path):
    cmd = build_command(["-np", "4", option, "node1:2,node2:2", "./prog"])
    assert cmd == ["mpiexec.openmpi", "-n", "4", "--host", "node1:2,node2:2", "./prog"]
    f = tmp_path / "hosts"
    f.write_text("node1:2  # first\nnode2\n")
    cmd = build_command(["-np", "3", "-f", str(f), "./prog"])
    assert cmd == ["mpiexec.openmpi", "-n", "3", "--host", "node1:2,node2", "./prog"]
    with pytest.raises(SystemExit, match="not a host or host:slots"):
        build_command(["-np", "2", option, "a:x", "./prog"])


def test_transparent_options_go_to_the_runner_once():
    """--compression/--accumulate reach concord.tensorflow.run; naming the runner by
    hand does not wrap it twice; for a program that is not Python they are an error."""
    pytest.importorskip("tensorflow")
    cmd = build_command(["-np", "2", "--compression", "fp16", "--accumulate", "3", "python",
                         "t.py", "--x"])
    assert cmd[3:] == [sys.executable, "-m", "concord.tensorflow.run", "--compression", "fp16",
                       "--accumulate", "3", "t.py", "--x"]
    cmd = build_command(["-np", "2", "python", "-m", "concord.tensorflow.run", "--accumulate",
                         "2", "t.py"])
    assert cmd[3:] == [sys.executable, "-m", "concord.tensorflow.run", "--accumulate", "2",
                       "t.py"]
    with pytest.raises(SystemExit, match="--compression is an option of the transparent mode"):
        build_command(["-np", "2", "--compression", "fp16", "./a.out"])
    with pytest.raises(SystemExit, match="--accumulate is an option of the transparent mode"):
        build_command(["-np", "2", "--accumulate", "2", "--no-tensorflow", "python", "t.py"])


@pytest.fixture
def installed(monkeypatch):
    """Pretends TensorFlow, torch and Keras are installed."""
    import concord.launcher as launcher
    monkeypatch.setattr(launcher, "_has_tensorflow", lambda: True)
    monkeypatch.setattr(launcher, "_has_keras_on_torch", lambda: True)
    return launcher


def test_keras_on_torch_runs_through_the_torch_runner(installed, monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    torch_run = [sys.executable, "-m", "concord.torch.run"]
    for tensorflow_installed in (True, False):
        monkeypatch.setattr(installed, "_has_tensorflow", lambda: tensorflow_installed)
        assert build_command(["-np", "2", "python", "t.py", "-x"])[3:] == torch_run + ["t.py", "-x"]
    assert build_command(["-np", "2", "--compression", "fp16", "--accumulate", "2", "python",
                          "t.py"])[3:] == torch_run + ["--compression", "fp16", "--accumulate",
                                                       "2", "t.py"]
    # named by hand: not twice; --no-tensorflow runs the script as it is
    assert build_command(["-np", "2", "python", "-m", "concord.torch.run", "t.py"])[3:] == \
        torch_run + ["t.py"]
    assert build_command(["-np", "2", "--no-tensorflow", "python", "t.py"])[3:] == \
        [sys.executable, "t.py"]


def test_keras_json_chooses_the_backend_unless_keras_backend_is_set(installed, monkeypatch,
                                                                      tmp_path):
    def runner():
        return build_command(["-np", "2", "python", "t.py"])[4:6]

    monkeypatch.delenv("KERAS_BACKEND")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert runner() == ["-m", "concord.tensorflow.run"]  # no keras.json: Keras's default
    (tmp_path / "keras.json").write_text('{"floatx": "float32", "backend": "torch"}')
    assert runner() == ["-m", "concord.torch.run"]
    monkeypatch.setenv("KERAS_BACKEND", "")  # empty: Keras reads keras.json
    assert runner() == ["-m", "concord.torch.run"]
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    assert runner() == ["-m", "concord.tensorflow.run"]
    monkeypatch.delenv("KERAS_BACKEND")
    (tmp_path / "keras.json").write_text("{not json")
    assert runner() == ["-m", "concord.tensorflow.run"]


def test_keras_on_torch_without_torch_runs_the_script_as_it_is(installed, monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    monkeypatch.setattr(installed, "_has_keras_on_torch", lambda: False)
    assert build_command(["-np", "2", "python", "t.py"])[3:] == [sys.executable, "t.py"]
    with pytest.raises(SystemExit, match="--accumulate is an option of the transparent mode"):
        build_command(["-np", "2", "--accumulate", "2", "python", "t.py"])


def test_keras_on_another_backend_runs_the_script_as_it_is_and_says_so(installed, monkeypatch,
                                                                       capsys):
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert build_command(["-np", "2", "python", "t.py"])[3:] == [sys.executable, "t.py"]
    assert "backend here is 'jax'" in capsys.readouterr().err


def _ranks_started(tmp_path, count, timeout=60):
    """Waits until `count` ranks have written their pid files; their pids."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [int(p.read_text()) for p in tmp_path.glob("rank-*") if p.read_text()]
        if len(pids) == count:
            return pids
        time.sleep(0.2)
    raise AssertionError(f"{count} ranks did not start within {timeout} s")


def _alive(pid):
    import os
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for this purpose
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


RANK = ("import os, sys, time; open(os.path.join(sys.argv[1], 'rank-' + os.environ.get("
        "'PMI_RANK', '0')), 'w').write(str(os.getpid())); time.sleep(120)")


def _start_and_signal(tmp_path, launcher, ranks, signum):
    """concordrun -np `ranks` of RANK under `launcher`, sent `signum` once every rank
    runs: (concordrun's exit status, whether a rank is still alive 30 s later)."""
    import signal
    import subprocess
    import time
    env = dict(os.environ, CONCORD_MPIEXEC=launcher)
    p = subprocess.Popen([sys.executable, "-m", "concord.launcher", "-np", str(ranks),
                          sys.executable, "-c", RANK, str(tmp_path)], env=env,
                         stdin=subprocess.DEVNULL,
                         start_new_session=True)  # the signal reaches concordrun alone
    try:
        pids = _ranks_started(tmp_path, ranks)
        p.send_signal(getattr(signal, signum))
        status = p.wait(timeout=60)
        deadline = time.monotonic() + 30
        while any(_alive(r) for r in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        return status, any(_alive(r) for r in pids)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def test_a_job_stopped_by_sigterm_fails_even_where_mpiexec_says_0(tmp_path):
    """A launcher that ends its program on SIGTERM and exits 0, as Hydra of MPICH 4.0
    does about every other time (10 runs: 0 five times, 15 five times): concordrun,
    stopped by SIGTERM, exits as a shell reports a process SIGTERM ended (128 + 15)."""
    fake = tmp_path / "fake-hydra"
    fake.write_text("#!/bin/sh\nshift 2\n\"$@\" &\nchild=$!\n"
                    "trap 'kill $child; wait $child; exit 0' TERM\nwait $child\n")
    fake.chmod(0o755)
    assert _start_and_signal(tmp_path, str(fake), 1, "SIGTERM") == (128 + 15, False)


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT", "SIGHUP", "SIGKILL"])
def test_a_job_stopped_by_a_signal_fails_and_leaves_no_rank(tmp_path, signum):
    """A job stopped by a scheduler's SIGTERM (or an interrupt, a hangup, SIGKILL) is not
    a job that succeeded: concordrun exits non-zero, as Open MPI's mpirun does (1), and
    no rank is left."""
    if shutil.which("mpiexec.mpich") is None:
        pytest.skip("MPICH's launcher is not installed")
    status, left = _start_and_signal(tmp_path, "mpiexec.mpich", 2, signum)
    assert status != 0 and not left
