"""Runs an unmodified Keras training script data-parallel over MPI ranks.

    concordrun -np N python train.py args...
    concordrun -np N python -m package.train args...
    mpiexec.mpich -n N python -m concord.tensorflow.run [options] train.py args...

What is patched (each part can be switched off, see --help):
  optimizers   every Keras optimizer's apply() averages gradients over ranks
               first (the outermost optimizer only, so a LossScaleOptimizer's
               skip decision agrees everywhere); covers fit() and custom loops
               with tape.gradient + optimizer.apply_gradients. --compression
               fp16 sends them as float16; --accumulate K sums them over K
               batches and exchanges and steps once per K
  fit          inputs sharded by rank (numpy arrays, lists and dicts of them,
               and tf.data datasets; validation data and validation_split
               too), the model's and optimizer's variables broadcast from rank
               0 before the first step (after the callbacks' on_train_begin, so
               a BackupAndRestore that restored on rank 0 restores everywhere),
               epoch metrics and BatchNormalization's moving statistics
               averaged over ranks
  evaluate     inputs sharded, results averaged over ranks
  compile      jit_compile turned off (concord's ops have no XLA kernel)
               where Keras defines compile(), so load_model still compiles
  seed         rank 0 draws a random seed and every rank sets it
               (keras.utils.set_random_seed) before the script starts, so
               unseeded shuffles agree on every rank; a seed the script sets
               replaces it
  io           on ranks other than 0: no progress output (verbose=0), no
               ModelCheckpoint/TensorBoard/CSVLogger/BackupAndRestore
               callbacks, stdout silenced. Saving (Model.save, save_weights,
               export, keras.saving/keras.models.save_model) is collective
               outside fit(): rank 0 writes, then every rank waits for it, so
               a load right after a save sees the file on every rank; every
               rank must call it. Inside fit() (callbacks) rank 0 writes
               without waiting, and fit() ends with a wait on every rank.

A script that uses the explicit API itself (import concord.horovod, or
concord.tensorflow.init(), DistributedOptimizer or DistributedGradientTape)
runs without these patches: they are undone the moment it does (said once),
so nothing is averaged or sharded twice. The code is in
concord.tensorflow.transparent, one module per part (those patched alike
on every backend in concord.transparent).

Batches: by default the script's batch_size stays the global batch: each rank
takes batch_size/N samples of every batch, strided (rank r takes samples r,
r+N, ...), so each step sees the same samples as a single-process run and the
same hyperparameters train the same model. --per-rank-batch keeps batch_size
per rank instead (numpy inputs; weak scaling). Every rank runs the same number
of steps and no rank gets an empty batch: a batch of k < N samples (the last
one) is shared, rank r taking its sample r mod k; a global batch smaller than N
is an error. See docs/TENSORFLOW.md.
"""
from __future__ import annotations

import os
import sys

from concord.tensorflow.transparent.options import parse
from concord.tensorflow.transparent.patcher import Patcher
from concord.transparent.explicit import on_explicit_api
from concord.transparent.program import cores_per_rank, run_program


def _share_cores():
    """Gives each rank its share of the node's cores for TensorFlow's thread
    pools (unless the user chose)."""
    share = cores_per_rank()
    if share is None:
        return
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(share))
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(max(1, min(2, share))))
    os.environ.setdefault("OMP_NUM_THREADS", str(share))


def main(argv=None):
    o = parse(sys.argv[1:] if argv is None else argv, __doc__)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _share_cores()
    # A rank that leaves training early (a callback stopping it on its own loss,
    # an error a script catches) would leave the others waiting for ever in the
    # next gradient exchange: give up after 30 minutes, naming the missing ranks.
    # Long enough for rank 0 to write a large checkpoint while the others wait.
    os.environ.setdefault("CONCORD_STALL_TIMEOUT_S", "1800")
    from concord import tensorflow as ctf
    ctf._start()
    p = Patcher(o)
    on_explicit_api(p.undo)
    p.apply()
    run_program(o)


if __name__ == "__main__":
    main()
