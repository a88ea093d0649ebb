"""concord as a torch.distributed backend.

    import concord.torch            # registers the backend "concord"
    import torch.distributed as dist
    dist.init_process_group("concord")

Run under ``concordrun -np N`` or ``mpiexec -n N``. Importing this module sets
torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) from MPI where they are unset, so
``init_process_group`` needs no other argument, scripts that read them work,
and the same job can also make gloo groups or use ``"cpu:concord,cuda:nccl"``.
The import is collective (rank 0 picks the store's port and tells the others):
import it on every rank. docs/PYTORCH.md says what the backend supports.
"""
from __future__ import annotations

import atexit
import os
import socket

import torch
import torch.distributed as dist

import concord as _concord

try:
    from .. import _torch
except ImportError as _e:  # pragma: no cover - depends on how concord was built
    raise ImportError(
        "concord.torch: this concord package was built without its PyTorch backend, or "
        f"against another torch ({_e}). Reinstall concord with torch importable by the "
        "Python that builds it: `pip install .` (docs/PYTORCH.md)") from None

__all__ = ["BACKEND", "set_torchrun_environment"]

BACKEND = "concord"

_HOST_NAME_MAX = 255  # bytes, POSIX

# Variables that show a process was started by an MPI launcher.
_MPI_LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                           "MPI_LOCALRANKID", "HYDI_CONTROL_FD")


def _check_launcher() -> None:
    launched_by_mpi = any(v in os.environ for v in _MPI_LAUNCHER_VARIABLES)
    if "TORCHELASTIC_RUN_ID" in os.environ and not launched_by_mpi:
        raise RuntimeError(
            "concord.torch: this process was started by torchrun, but concord's ranks are MPI "
            "processes. Launch the script with `concordrun -np N python script.py` (or "
            "`mpiexec -n N python script.py`) instead of torchrun; "
            "init_process_group(\"concord\") then needs no other argument.")


def _check_torch_version() -> None:
    built, running = _torch.TORCH_VERSION, torch.__version__
    if built.split("+")[0] != running.split("+")[0]:
        raise ImportError(
            f"concord.torch: concord's backend was built against torch {built}, and this is "
            f"torch {running}: reinstall concord (`pip install .`) with this torch")


def _store_address() -> tuple[str, int]:
    """Rank 0's address and a free port of it, agreed by every rank (an allreduce
    in which only rank 0 contributes: no engine thread is started for it)."""
    import numpy as np

    port, encoded = 0, b""
    if _concord.rank() == 0:
        single_node = _concord.local_size() == _concord.size()
        host = "127.0.0.1" if single_node else socket.gethostname()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1" if single_node else "", 0))
            port = s.getsockname()[1]
        encoded = host.encode()
    message = np.zeros(_HOST_NAME_MAX + 2, dtype=np.int64)
    message[0], message[1] = port, len(encoded)
    message[2:2 + len(encoded)] = np.frombuffer(encoded, dtype=np.uint8)
    agreed = _concord.allreduce(message)
    host = bytes(agreed[2:2 + int(agreed[1])].astype(np.uint8)).decode()
    return host, int(agreed[0])


def set_torchrun_environment() -> None:
    """Sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT from MPI where unset (collective: call it on every rank)."""
    _check_launcher()
    values = {"RANK": _concord.rank(), "WORLD_SIZE": _concord.size(),
              "LOCAL_RANK": _concord.local_rank(), "LOCAL_WORLD_SIZE": _concord.local_size()}
    for key, value in values.items():
        os.environ.setdefault(key, str(value))
    # Every rank takes part, whatever it has set, so the broadcast matches.
    host, port = _store_address()
    os.environ.setdefault("MASTER_ADDR", host)
    os.environ.setdefault("MASTER_PORT", str(port))


def _create_backend(options, pg_options=None):
    """torch.distributed's constructor for the "concord" backend (extended API)."""
    del pg_options  # concord has no per-group options
    return _torch.new_backend(options.group_rank, options.group_size,
                              list(options.global_ranks_in_group),
                              options.timeout.total_seconds(), str(options.group_id))


def _shutdown() -> None:
    # Before concord's own exit handler finalizes MPI (registered earlier, so it
    # runs later).
    _torch.shutdown_all()


_check_torch_version()
_check_launcher()  # before MPI starts: torchrun's processes are not MPI ranks
_concord.init()
set_torchrun_environment()
if BACKEND.upper() not in dist.Backend._plugins:  # imported once per process
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True,
                                  devices=["cpu", "cuda"])
atexit.register(_shutdown)
