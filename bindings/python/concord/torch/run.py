"""Runs an unmodified Keras script on its torch backend, data-parallel over MPI ranks.

    KERAS_BACKEND=torch concordrun -np N python train.py args...
    mpiexec.mpich -n N python -m concord.torch.run [options] train.py args...

concordrun picks this runner where Keras would run on torch (KERAS_BACKEND=torch,
or "backend": "torch" in keras.json). torch.distributed is initialised with
concord's backend before the script starts (init_process_group("concord")); a
script that initialises it itself distributes itself: run it as it is with
concordrun --no-tensorflow. What is patched (each part can be switched off, see
--help):
  optimizers   every Keras optimizer's apply() averages the gradients over
               ranks first, between loss.backward() and the update: one
               all_reduce of a flattened buffer per step (per dtype and
               device). --compression fp16 sends them as float16;
               --accumulate K sums them over K batches and exchanges and
               steps once per K
  fit          inputs sharded by rank (numpy arrays, lists, tuples and dicts
               of them, validation data and validation_split too; a torch
               DataLoader's or a PyDataset's batches are cut to each rank's
               share; other inputs are an error that says what to use), the
               model's and optimizer's variables broadcast from rank 0 before
               the first step, epoch metrics and BatchNormalization's moving
               statistics averaged over ranks, TerminateOnNaN deciding on the
               loss of every rank's share
  evaluate     inputs sharded, results averaged over ranks
  compile      jit_compile turned off (torch.compile would trace the exchange)
  seed         rank 0 draws a random seed and every rank sets it
               (keras.utils.set_random_seed: Python, numpy, torch) before the
               script starts; a seed the script sets replaces it
  io           on ranks other than 0: no progress output, no
               ModelCheckpoint/TensorBoard/CSVLogger/BackupAndRestore, stdout
               silenced; saving is collective outside fit() (rank 0 writes)

keras-nightly (3.16 on) wraps the model in DistributedDataParallel itself once
torch.distributed is initialised, and sums its metrics over ranks: then DDP
(over concord) averages the gradients, and concordrun averages neither them
nor the metrics a second time. Batches: batch_size stays the global batch,
split by stride over the ranks, as on TensorFlow (concord.tensorflow.run).
See docs/PYTORCH.md, "Keras 3 on torch, under concordrun".
"""
from __future__ import annotations

import os
import sys

from concord.torch.transparent.patcher import PARTS
from concord.transparent.explicit import on_explicit_api
from concord.transparent.options import parse
from concord.transparent.program import cores_per_rank, run_program


def _group_timeout():
    """The process group's timeout: CONCORD_STALL_TIMEOUT_S's, so that the
    gradient exchanges (torch.distributed) and the collectives the patches add
    (concord's engine) give up on a missing rank after the same time. Without
    it, a rank that failed after the latter waited in MPI_Finalize for one left
    in an all_reduce for 30 minutes (torch's default). 0 (off) leaves torch's
    default: a group's timeout cannot be off. import concord.torch has checked
    the value already (the engine's settings)."""
    import datetime
    seconds = float(os.environ["CONCORD_STALL_TIMEOUT_S"] or 0)
    return datetime.timedelta(seconds=seconds) if seconds > 0 else None


def _start_torch():
    """This rank's share of the node's cores (unless the user chose), and the
    process group, with concord's backend."""
    import torch
    import torch.distributed as dist
    share = cores_per_rank()
    if share is not None and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(share)
    if not dist.is_initialized():
        timeout = _group_timeout()
        dist.init_process_group("concord", **({} if timeout is None else {"timeout": timeout}))


def _refuse_second_group(p):
    """The script's own init_process_group would fail in torch with a message
    that does not say why: say it."""
    def init_process_group(*args, **kwargs):
        raise RuntimeError(
            "concord: under concordrun, Keras on torch runs data-parallel with torch.distributed "
            "initialised already (backend \"concord\"): the script initialises it itself, so it "
            "distributes itself. Run it as it is with concordrun --no-tensorflow, or call "
            "init_process_group only when not torch.distributed.is_initialized()")
    p.set(p.dist, "init_process_group", init_process_group)


def _check_backend(keras):
    if keras.backend.backend() != "torch":
        raise SystemExit(
            f"concord.torch.run: Keras runs on its {keras.backend.backend()} backend here "
            "(KERAS_BACKEND, or keras.json): this runner is for its torch backend; "
            "concord.tensorflow.run is for TensorFlow")


def main(argv=None):
    o = parse(sys.argv[1:] if argv is None else argv, __doc__, "python -m concord.torch.run",
              PARTS)
    os.environ.setdefault("KERAS_BACKEND", "torch")
    # As on TensorFlow: a rank that leaves training early fails the others
    # after 30 minutes, naming it, instead of leaving them waiting for ever
    # (the process group's collectives too: _group_timeout).
    os.environ.setdefault("CONCORD_STALL_TIMEOUT_S", "1800")
    _start_torch()
    import keras
    _check_backend(keras)
    from concord.torch.transparent.patcher import Patcher
    p = Patcher(o)
    on_explicit_api(p.undo)
    p.apply()
    _refuse_second_group(p)
    run_program(o)
    if p.dist.is_initialized():  # the script may have ended it
        p.dist.destroy_process_group()


if __name__ == "__main__":
    main()
