"""concordrun: launches a program on N ranks with the mpiexec of concord's MPI.

    concordrun -np 4 python train.py --epochs 3
    concordrun -np 2 -genv OMP_NUM_THREADS 1 python script.py

A Python script runs data-parallel through concord.tensorflow.run (an unmodified
Keras script: sharded inputs, averaged gradients, rank 0 writes) when TensorFlow is
installed; --no-tensorflow runs it as it is.

Options other than -np/-n are passed to mpiexec unchanged (put them before the
program, or end them with --). The MPI launcher is the one of the MPI concord was built with
(`mpiexec.mpich` or `mpiexec.openmpi`); CONCORD_MPIEXEC overrides it, with arguments if needed
(CONCORD_MPIEXEC="mpiexec.openmpi --oversubscribe").
"""
import os
import re
import shlex
import shutil
import sys


# MPICH (Hydra) options that take values, and how many.
_VALUED = {"-genv": 2, "-env": 2, "-host": 1, "-hosts": 1, "-f": 1, "-hostfile": 1,
           "-machinefile": 1, "-ppn": 1, "-bind-to": 1, "-map-by": 1, "-genvlist": 1,
           "-envlist": 1, "-wdir": 1, "-launcher": 1, "-iface": 1, "-configfile": 1,
           "-rmk": 1, "-demux": 1, "-outfile-pattern": 1, "-errfile-pattern": 1,
           "-prepend-pattern": 1, "-bootstrap": 1, "-bootstrap-exec": 1, "-rankmap": 1,
           "-gpus-per-proc": 1, "-usize": 1, "-nameserver": 1, "-localhost": 1,
           "-topolib": 1, "-binding": 1,
           # Open MPI (mpirun) options that take values.
           "-x": 1, "--map-by": 1, "--bind-to": 1, "--rank-by": 1, "-H": 1, "--host": 1,
           "--hostfile": 1, "--machinefile": 1, "--mca": 2, "-mca": 2, "--npernode": 1,
           "-npernode": 1, "--rankfile": 1, "--output-filename": 1, "--prefix": 1,
           "-wd": 1, "--wdir": 1}

# A Python interpreter, by its file name: python, python3, python3.11, /venv/bin/python.
_PYTHON = re.compile(r"python[0-9.]*$")
# Interpreter options that take a value (python -W error -X dev script.py).
_PYTHON_VALUED = ("-W", "-X")


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


def _install_hint():
    try:
        from concord._mpi_build import MPI_FLAVOR
    except ImportError:
        MPI_FLAVOR = "MPICH"
    if MPI_FLAVOR == "OpenMPI":
        return "concord was built with Open MPI: install its launcher (apt-get install openmpi-bin)"
    return "concord was built with MPICH: install its launcher (apt-get install mpich)"


def _has_tensorflow():
    import importlib.util
    return importlib.util.find_spec("tensorflow") is not None


def _python_program(program, tensorflow):
    """A Python program line, its script (or -m module) run through
    concord.tensorflow.run when TensorFlow is installed."""
    # Plain "python" means this interpreter, so the ranks see the same packages;
    # a path (a venv's python) is kept.
    interpreter = sys.executable if program[0] in ("python", "python3") else program[0]
    flags = []
    i = 1
    while i < len(program) and program[i].startswith("-") and program[i] not in ("-", "-c", "-m"):
        n = 2 if program[i] in _PYTHON_VALUED else 1
        flags.extend(program[i:i + n])
        i += n
    rest = program[i:]
    if tensorflow and rest and rest[0] not in ("-c", "-") and _has_tensorflow():
        # concord.tensorflow.run patches Keras, then runs the script or module.
        return [interpreter] + flags + ["-m", "concord.tensorflow.run"] + rest
    return [interpreter] + flags + rest


def build_command(argv, tensorflow=True):
    """(mpiexec argv) from concordrun's argv; raises SystemExit on bad usage."""
    ranks = None
    mpi_args = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-np", "-n", "--np"):
            if i + 1 >= len(argv):
                raise SystemExit(f"concordrun: {a} needs a number of ranks")
            ranks = argv[i + 1]
            i += 2
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
        n = _VALUED.get(a, 0)
        if i + n >= len(argv):
            raise SystemExit(f"concordrun: {a} needs {n} value(s)")
        mpi_args.extend(argv[i:i + 1 + n])
        i += 1 + n
    program = argv[i:]
    if not program:
        raise SystemExit("concordrun: no program given; usage: concordrun -np N program [args...]")
    if ranks is None or not ranks.isdigit() or int(ranks) < 1:
        raise SystemExit("concordrun: -np N (N >= 1) is required")
    mpiexec = mpiexec_command()
    if not mpiexec or shutil.which(mpiexec[0]) is None:
        raise SystemExit(f"concordrun: {' '.join(mpiexec) or 'CONCORD_MPIEXEC'} not found; "
                         + _install_hint())
    if _PYTHON.match(os.path.basename(program[0])):
        program = _python_program(program, tensorflow)
    return mpiexec + ["-n", ranks] + mpi_args + program


def main(argv=None):
    cmd = build_command(sys.argv[1:] if argv is None else argv)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
