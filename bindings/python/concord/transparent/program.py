"""The runners' common steps around the script: each rank's share of the
node's cores, and running the script (or -m module) as python would."""
from __future__ import annotations

import os
import runpy
import sys


def cores_per_rank():
    """This rank's share of the node's cores: N ranks each running a thread
    pool as wide as the machine oversubscribe it, and the gradient exchange
    waits on the slowest. None where this rank is alone on its node."""
    # Ranks on this node, as MPICH's and Open MPI's launchers say it.
    local = int(os.environ.get("MPI_LOCALNRANKS") or
                os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or "1")
    if local <= 1:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // local)


def run_program(o):
    """Runs o.script (or o.module) with o.args as its arguments, as __main__."""
    if o.module is not None:
        sys.argv = [o.module] + o.args  # runpy puts the module's file name first
        sys.path.insert(0, os.getcwd())  # as python -m does
        runpy.run_module(o.module, run_name="__main__", alter_sys=True)
        return
    sys.argv = [o.script] + o.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(o.script)))
    runpy.run_path(o.script, run_name="__main__")
