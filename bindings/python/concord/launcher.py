"""concordrun: launches a program on N ranks with the mpiexec of concord's MPI.

    concordrun -np 4 python train.py --epochs 3
    concordrun -np 2 -genv OMP_NUM_THREADS 1 python script.py
    concordrun -np 4 -hosts node1,node2 python train.py       (ranks round-robin over hosts)
    concordrun -np 4 -H node1:2,node2:2 python train.py       (horovodrun/Open MPI spelling)
    concordrun -np 8 -f hostfile python train.py              (lines "host", "host:slots"
                                                               or "host slots=N")

Host lists and hostfiles are checked first, then written in the launcher's own spelling
(Hydra's -hosts/-f, or Open MPI's --host host:slots,...); so are the environment's
options (Hydra's -genv NAME VALUE and -genvlist A,B, Open MPI's -x NAME=VALUE and -x NAME).

Inside a Slurm allocation (salloc/sbatch) MPICH's mpiexec finds the nodes and starts
the ranks with srun itself; no host option is needed. docs/SCALING.md has the recipes.

A Python script runs data-parallel through the transparent mode (an unmodified
Keras script: sharded inputs, averaged gradients, rank 0 writes): through
concord.torch.run where Keras would run on torch (KERAS_BACKEND=torch, or "backend":
"torch" in keras.json) and torch is installed, else through concord.tensorflow.run
when TensorFlow is installed; --no-tensorflow runs it as it is. So does a module
(python -m pkg.train), a script run as ./train.py whose #! line names python, and
python after env (env A=1 python train.py); python -c CODE, python - and an
interactive python run as given (the interpreter's options are read as CPython
reads them). A script that uses
the explicit API (concord.horovod, concord.tensorflow) runs without those patches
(docs/HOROVOD.md). Options of that transparent mode given to concordrun go to it:

    concordrun -np 4 --compression fp16 --accumulate 2 python train.py

Options other than -np/-n are passed to mpiexec unchanged (put them before the
program, or end them with --). The MPI launcher is the one of the MPI concord was built with
(`mpiexec.mpich` or `mpiexec.openmpi`); CONCORD_MPIEXEC overrides it, with arguments if needed
(CONCORD_MPIEXEC="mpiexec.openmpi --oversubscribe"). concordrun exits with its status, and
passes on the signals that stop a job (a job stopped so exits non-zero).
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

from concord._mpiexec_args import (_ENV_OPTIONS, _HOSTFILES, _HOSTS, _VALUED, _env_arguments,
                                   _host_arguments, _option_name)


# A Python interpreter, by its file name: python, python3, python3.11, /venv/bin/python.
_PYTHON = re.compile(r"python[0-9.]*$")
# CPython's command line (3.9-3.13): one-letter options, which may be combined
# (-uB); -W and -X take a value, the rest of the word or the next word (-Werror,
# -W error, -uWerror); -c and -m take one the same way and end the options, as
# "-" (stdin), "--" (the next word is the script) and a script do. Of the long
# options only --check-hash-based-pycs takes a value, the next word.
_PYTHON_VALUED = "WX"
_PYTHON_ENDING = "cm"
_PYTHON_LONG_VALUED = ("--check-hash-based-pycs",)


def mpiexec_command():
    """The launcher: CONCORD_MPIEXEC (split like a shell would), else the mpiexec of the
    MPI this package was built with, else MPICH's."""
    override = os.environ.get("CONCORD_MPIEXEC")
    if override:
        return shlex.split(override)
    try:
        from concord._mpi_build import MPIEXEC
    except ImportError:  # a source tree that was never built
        MPIEXEC = "mpiexec.mpich"
    return [MPIEXEC]


def _launcher_is_open_mpi(mpiexec):
    """Whether the launcher is Open MPI's: by its name where it says (mpiexec.openmpi,
    orterun), else by the MPI this package was built with."""
    name = os.path.basename(mpiexec[0]) if mpiexec else ""
    if "openmpi" in name or name in ("orterun", "prterun"):
        return True
    if "mpich" in name or "hydra" in name:
        return False
    try:
        from concord._mpi_build import MPI_FLAVOR
    except ImportError:
        return False
    return MPI_FLAVOR == "OpenMPI"


def _install_hint():
    try:
        from concord._mpi_build import MPI_FLAVOR
    except ImportError:
        MPI_FLAVOR = "MPICH"
    if MPI_FLAVOR == "OpenMPI":
        return "concord was built with Open MPI: install its launcher (apt-get install openmpi-bin)"
    return "concord was built with MPICH: install its launcher (apt-get install mpich)"


def _has_module(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


def _has_tensorflow():
    return _has_module("tensorflow")


def _has_keras_on_torch():
    return _has_module("torch") and _has_module("keras")


def _keras_backend():
    """The backend Keras will pick, as keras/src/backend/config.py does:
    KERAS_BACKEND (when not empty), else "backend" in keras.json under
    KERAS_HOME (default ~/.keras, or /tmp/.keras where home is not writable),
    else tensorflow. Read here, without importing Keras."""
    chosen = os.environ.get("KERAS_BACKEND")
    if chosen:
        return chosen
    home = os.environ.get("KERAS_HOME")
    if home is None:
        base = os.path.expanduser("~")
        home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
    try:
        with open(os.path.join(os.path.expanduser(home), "keras.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return "tensorflow"
    backend = config.get("backend") if isinstance(config, dict) else None
    return backend or "tensorflow"


# concordrun options that belong to the transparent mode (concord.tensorflow.run,
# concord.torch.run), and how many values each takes.
_TRANSPARENT = {"--compression": 1, "--accumulate": 1, "--per-rank-batch": 0}
_RUNNERS = (["-m", "concord.tensorflow.run"], ["-m", "concord.torch.run"])


def _transparent_runner():
    """The runner of the transparent mode for the backend Keras will pick:
    concord.torch.run for torch (where torch and Keras are installed),
    concord.tensorflow.run otherwise (where TensorFlow is installed); None
    where there is none, also for Keras's other backends (said)."""
    backend = _keras_backend()
    if backend == "torch":
        return _RUNNERS[1] if _has_keras_on_torch() else None
    if backend != "tensorflow":
        print(f"concordrun: Keras's backend here is {backend!r}: the transparent mode covers "
              "its tensorflow and torch backends, so the script runs as it is (it distributes "
              "itself, as with --no-tensorflow)", file=sys.stderr)
        return None
    return _RUNNERS[0] if _has_tensorflow() else None


def _python_words(words):
    """A python command line after the interpreter, as CPython reads it:
    (options, kind, target, args). kind is "script", "module" (-m), "command"
    (-c), "stdin" ("-") or None (no program: interactive, or an option python
    refuses); options are the words before the program, without a final "--"."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            rest = words[i + 1:]
            return (words[:i], "script", rest[0], rest[1:]) if rest else (words, None, None, [])
        if word == "-":
            return words[:i], "stdin", word, words[i + 1:]
        if not word.startswith("-"):
            return words[:i], "script", word, words[i + 1:]
        if word.startswith("--"):
            i += 2 if word in _PYTHON_LONG_VALUED else 1
            continue
        for j in range(1, len(word)):
            letter, attached = word[j], word[j + 1:]
            if letter in _PYTHON_ENDING:
                value = attached or (words[i + 1] if i + 1 < len(words) else None)
                if value is None:
                    return words, None, None, []  # python says what is missing
                options = words[:i] + ([word[:j]] if j > 1 else [])
                kind = "command" if letter == "c" else "module"
                return options, kind, value, words[i + (1 if attached else 2):]
            if letter in _PYTHON_VALUED:
                i += 0 if attached else 1  # the value is the next word
                break
        i += 1
    return words, None, None, []


def _python_program(program, transparent_mode, transparent=()):
    """A Python program line, its script (or -m module) run through the
    transparent mode's runner (with `transparent`, that mode's options) unless
    transparent_mode is False or there is none. `python -c CODE`, `python -`
    and an interactive python run as given (the transparent mode runs a script
    or a module)."""
    # Plain "python" means this interpreter, so the ranks see the same packages;
    # a path (a venv's python) is kept.
    interpreter = sys.executable if program[0] in ("python", "python3") else program[0]
    options, kind, target, args = _python_words(program[1:])
    if kind == "module" and ["-m", target] in _RUNNERS:  # a runner named by hand: not twice
        return [interpreter] + options + ["-m", target] + list(transparent) + args
    runner = _transparent_runner() if transparent_mode and kind in ("script", "module") else None
    if runner is None:
        if transparent:
            raise SystemExit(f"concordrun: {transparent[0]} is an option of the transparent "
                             "mode, which runs a Python script or module (not -c, -, or an "
                             "interactive python) with TensorFlow installed, or Keras on torch "
                             "(KERAS_BACKEND=torch) with torch installed, and without "
                             "--no-tensorflow")
        return [interpreter] + program[1:]
    # The runner patches Keras, then runs the script or module.
    if kind == "module":
        program_words = ["-m", target]
    else:  # after "--" a script may look like an option: the runner takes "--" too
        program_words = (["--"] if target.startswith("-") else []) + [target]
    return [interpreter] + options + runner + list(transparent) + program_words + args


def _after_env(words):
    """The words after env's options and NAME=VALUE assignments (env -u NAME takes one)."""
    i = 0
    while i < len(words) and (words[i].startswith("-") or "=" in words[i]):
        i += 2 if words[i] in ("-u", "--unset", "-C", "--chdir") else 1
    return i


def _shebang(path):
    """The interpreter line of a script's #! (its words), or None."""
    try:
        with open(path, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    return first[2:].decode("utf-8", "replace").split() or None


def _python_line(program):
    """(prefix, python command line) where `program` runs Python: a python interpreter,
    `env [NAME=VALUE ...] python ...` (prefix: the env words), or a script whose #!
    line names python, directly or through env (`./train.py` is `python ./train.py`);
    else None. So each runs through the transparent mode as `python train.py` does."""
    name = os.path.basename(program[0])
    if _PYTHON.match(name):
        return [], program
    if name == "env":
        k = 1 + _after_env(program[1:])
        if k < len(program) and _PYTHON.match(os.path.basename(program[k])):
            return program[:k], program[k:]
        return None
    interpreter = _shebang(program[0]) if os.path.isfile(program[0]) else None
    if interpreter and os.path.basename(interpreter[0]) == "env":
        interpreter = interpreter[1 + _after_env(interpreter[1:]):]
    if interpreter and _PYTHON.match(os.path.basename(interpreter[0])):
        return [], interpreter + program
    return None


def build_command(argv, tensorflow=True):
    """(mpiexec argv) from concordrun's argv; raises SystemExit on bad usage."""
    ranks = hosts_from = None
    mpi_args, transparent = [], []
    mpiexec = mpiexec_command()
    open_mpi = _launcher_is_open_mpi(mpiexec)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in _TRANSPARENT:
            n = _TRANSPARENT[a]
            if i + n >= len(argv):
                raise SystemExit(f"concordrun: {a} needs a value")
            transparent.extend(argv[i:i + 1 + n])
            i += 1 + n
            continue
        if a == "--no-tensorflow":
            tensorflow = False
            i += 1
            continue
        if a in ("-h", "--help"):
            print(__doc__.strip())
            raise SystemExit(0)
        if a == "--":
            i += 1
            break
        if not a.startswith("-"):
            break
        name, attached = _option_name(a)
        ranks_option = name in ("n", "np")
        n = 1 if ranks_option else _VALUED.get(name, 0)
        n = max(n - (attached is not None), 0)  # -name=value holds its (first) value
        if i + n >= len(argv):
            raise SystemExit(f"concordrun: {a} needs "
                             + ("a number of ranks" if ranks_option else f"{n} value(s)"))
        words, i = argv[i:i + 1 + n], i + 1 + n
        if ranks_option:
            ranks = attached if attached is not None else words[1]
        elif f"-{name}" in _HOSTS or f"-{name}" in _HOSTFILES:
            # Every spelling (-host, --host, -hosts=...) is checked and counted.
            # Hydra refuses a second host list or hostfile; Open MPI would add the
            # second's slots to the first's (--host a:2 --host a:2 is 4 slots on a).
            if hosts_from:
                raise SystemExit(f"concordrun: {a} gives the hosts again (after {hosts_from}); "
                                 "give them once")
            hosts_from = a
            mpi_args.extend(_host_arguments(f"-{name}", words[-1] if attached is None
                                            else attached, open_mpi))
        elif name in _ENV_OPTIONS:
            mpi_args.extend(_env_arguments(name, words, attached, open_mpi))
        else:
            mpi_args.extend(words)
    program = argv[i:]
    if not program:
        raise SystemExit("concordrun: no program given; usage: concordrun -np N program [args...]")
    if ranks is None or not ranks.isdigit() or int(ranks) < 1:
        raise SystemExit("concordrun: -np N (N >= 1) is required")
    if not mpiexec or shutil.which(mpiexec[0]) is None:
        raise SystemExit(f"concordrun: {' '.join(mpiexec) or 'CONCORD_MPIEXEC'} not found; "
                         + _install_hint())
    line = _python_line(program)
    if line is not None:
        prefix, python = line
        program = prefix + _python_program(python, tensorflow, transparent)
    elif transparent:
        raise SystemExit(f"concordrun: {transparent[0]} is an option of the transparent mode, "
                         "which runs a Python program (python script.py)")
    return mpiexec + ["-n", ranks] + mpi_args + program


# Signals that stop a job, passed on to mpiexec: a scheduler's or timeout's SIGTERM,
# kill -INT, a hangup. SIGINT and SIGQUIT from the keyboard reach mpiexec already where
# concordrun runs in a terminal's foreground (its process group is mpiexec's): a second
# SIGINT would make Hydra abort at once instead of passing Ctrl-C on to the ranks.
_PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
              signal.SIGUSR2)
_FROM_THE_KEYBOARD = (signal.SIGINT, signal.SIGQUIT)


def _in_a_terminals_foreground():
    try:
        with open("/dev/tty", "rb") as tty:
            return os.tcgetpgrp(tty.fileno()) == os.getpgrp()
    except OSError:  # no controlling terminal
        return False


def _ends_with_concordrun():
    """The function mpiexec runs before it starts: it gets SIGTERM when concordrun ends,
    SIGKILL included, so no job outlives concordrun (Linux; elsewhere None)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    prctl, parent = ctypes.CDLL(None).prctl, os.getpid()
    pr_set_pdeathsig = 1

    def set_it():
        prctl(pr_set_pdeathsig, int(signal.SIGTERM))
        if os.getppid() != parent:  # concordrun ended before that
            os.kill(os.getpid(), signal.SIGTERM)
    return set_it


def _pass_on(child, signum):
    if not (signum in _FROM_THE_KEYBOARD and _in_a_terminals_foreground()):
        child.send_signal(signum)


def run(cmd):
    """Runs mpiexec, passing the signals that stop a job on to it; concordrun's exit
    status: mpiexec's, or 128 + the signal that stopped the job where mpiexec died of it
    or says 0. Hydra of MPICH 4.0 exits 0 about every other time it is stopped by
    SIGTERM, its ranks ended, which would tell a scheduler or CI that the job succeeded."""
    received, early, child = [], [], None

    def on_signal(signum, _frame):
        received.append(signum)
        if child is None:  # mpiexec is not there yet to pass it to
            early.append(signum)
        else:
            _pass_on(child, signum)

    for signum in _PASSED_ON:
        signal.signal(signum, on_signal)
    try:
        child = subprocess.Popen(cmd, preexec_fn=_ends_with_concordrun())
    except OSError as e:
        raise SystemExit(f"concordrun: cannot start {cmd[0]} ({e.strerror})")
    for signum in early:
        _pass_on(child, signum)
    status = child.wait()
    if status < 0:
        return 128 - status
    return 128 + received[0] if status == 0 and received else status


def main(argv=None):
    raise SystemExit(run(build_command(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
