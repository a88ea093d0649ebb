"""Runs an unmodified Keras training script data-parallel over MPI ranks.

    concordrun -np N python train.py args...
    mpiexec.mpich -n N python -m concord.tensorflow.run [options] train.py args...

What is patched (each part can be switched off, see --help):
  optimizers   every Keras optimizer's apply() averages gradients over ranks
               first (the outermost optimizer only, so a LossScaleOptimizer's
               skip decision agrees everywhere); covers fit() and custom loops
               with tape.gradient + optimizer.apply_gradients
  fit          inputs sharded by rank (numpy arrays and tf.data datasets), the
               model's and optimizer's variables broadcast from rank 0 before
               the first step, epoch metrics averaged over ranks
  evaluate     inputs sharded, results averaged over ranks
  compile      jit_compile turned off (concord's ops have no XLA kernel)
  io           on ranks other than 0: no progress output (verbose=0), no
               Model.save/save_weights, no ModelCheckpoint/TensorBoard/
               CSVLogger/BackupAndRestore callbacks, stdout silenced

Batches: by default the script's batch_size stays the global batch: each rank
takes batch_size/N samples of every batch, strided (rank r takes samples r,
r+N, ...), so each step sees the same samples as a single-process run and the
same hyperparameters train the same model. --per-rank-batch keeps batch_size
per rank instead (numpy inputs; weak scaling). Every rank runs the same number
of steps: batches smaller than N are dropped.
"""
from __future__ import annotations

import argparse
import functools
import os
import runpy
import sys

_PARTS = ("optimizers", "fit", "evaluate", "compile", "io")


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m concord.tensorflow.run",
                                 description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--per-rank-batch", action="store_true",
                    help="batch_size is per rank (weak scaling) instead of global")
    for part in _PARTS:
        ap.add_argument(f"--no-{part}", action="store_true", help=f"do not patch {part}")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    return ap.parse_args(argv)


def _is_numpy_like(x):
    import numpy as np
    if isinstance(x, np.ndarray):
        return True
    if isinstance(x, (list, tuple)) and x and all(isinstance(i, np.ndarray) for i in x):
        return True
    if isinstance(x, dict) and x and all(isinstance(i, np.ndarray) for i in x.values()):
        return True
    return False


def _slice_batches(ds, rank, size, drop_last=False):
    """Rank r's strided share of every batch of a batched dataset. A final batch
    with fewer samples than ranks would leave some ranks empty: numpy inputs drop
    it (drop_last, decided from the sample count, keeping the cardinality
    known); datasets of unknown length drop every such batch on all ranks."""
    import tensorflow as tf

    def first_dim(*elem):
        return tf.shape(tf.nest.flatten(elem)[0])[0]

    if drop_last:
        ds = ds.take(int(ds.cardinality()) - 1)
    elif int(ds.cardinality()) < 0:
        ds = ds.filter(lambda *e: first_dim(*e) >= size)
    return ds.map(lambda *e: tf.nest.map_structure(lambda t: t[rank::size],
                                                   e if len(e) > 1 else e[0]))


def _numpy_dataset(x, y, sample_weight, batch, shuffle, seed):
    import tensorflow as tf
    parts = [p for p in (x, y, sample_weight) if p is not None]
    ds = tf.data.Dataset.from_tensor_slices(tuple(parts) if len(parts) > 1 else parts[0])
    if shuffle:
        # The same seed on every rank: the same permutation, so global batches
        # hold the same samples everywhere.
        n = len(tf.nest.flatten(x)[0])
        ds = ds.shuffle(n, seed=seed, reshuffle_each_iteration=True)
    return ds.batch(batch)


def _average_result(result):
    """evaluate()'s scalar, list or dict, averaged over ranks (same structure)."""
    import numpy as np
    from concord import allreduce, size
    if size() == 1:
        return result
    if isinstance(result, dict):
        keys = list(result)
        averaged = allreduce(np.array([float(result[k]) for k in keys]), op="avg")
        return {k: float(v) for k, v in zip(keys, averaged)}
    if isinstance(result, (list, tuple)):
        return [float(v) for v in allreduce(np.array(result, dtype=np.float64), op="avg")]
    return float(allreduce(np.array([float(result)]), op="avg")[0])


class _Patcher:
    def __init__(self, options):
        import keras
        import tensorflow as tf

        from concord import tensorflow as ctf

        self.keras, self.tf, self.ctf = keras, tf, ctf
        self.o = options
        self.rank, self.size = ctf.rank(), ctf.size()
        self._said = set()

    def say_once(self, key, text):
        if key not in self._said and self.rank == 0:
            print(f"concord: {text}", file=sys.stderr)
        self._said.add(key)

    # -- optimizers --------------------------------------------------------
    def optimizers(self):
        base = self.keras.optimizers.Optimizer
        classes, todo = set(), [base]
        while todo:
            cls = todo.pop()
            if cls not in classes:
                classes.add(cls)
                todo.extend(cls.__subclasses__())
        for cls in classes:
            if "apply" in cls.__dict__:
                cls.apply = self.ctf._averaged_apply(cls.__dict__["apply"])
        # Classes that inherit apply() from above the Keras Optimizer.
        if "apply" not in base.__dict__:
            original = base.apply
            base.apply = self.ctf._averaged_apply(original)

    # -- data ----------------------------------------------------------------
    def shard(self, x, y, sample_weight, batch_size, shuffle):
        """(dataset, note) for fit/evaluate inputs, or None when left alone."""
        if self.size == 1:
            return None
        if _is_numpy_like(x):
            batch = batch_size or 32
            if self.o.per_rank_batch:
                batch *= self.size
            elif batch % self.size:
                self.say_once("batch", f"batch_size {batch} is not a multiple of {self.size} "
                                       "ranks: ranks get batches differing by one sample")
            ds = _numpy_dataset(x, y, sample_weight, batch, shuffle, seed=1234)
            n = len(self.tf.nest.flatten(x)[0])
            return _slice_batches(ds, self.rank, self.size, drop_last=0 < n % batch < self.size)
        if isinstance(x, self.tf.data.Dataset):
            return _slice_batches(x, self.rank, self.size)
        self.say_once("input", f"inputs of type {type(x).__name__} are not sharded")
        return None

    # -- fit / evaluate -------------------------------------------------------
    def fit(self):
        ctf, keras = self.ctf, self.keras
        original = keras.Model.fit
        patcher = self

        @functools.wraps(original)
        def fit(model, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
                validation_split=0.0, validation_data=None, shuffle=True, **kwargs):
            callbacks = list(callbacks or [])
            callbacks = [ctf.BroadcastInitialWeights(), ctf.MetricAverage()] + callbacks
            sample_weight = kwargs.pop("sample_weight", None)
            sharded = patcher.shard(x, y, sample_weight, batch_size, shuffle)
            if sharded is not None:
                shuffle = False  # the dataset shuffles, with the same seed on every rank
                if validation_split:
                    patcher.say_once("vsplit", "validation_split is applied per rank")
                x, y, batch_size = sharded, None, None
                if validation_data is not None and _is_numpy_like(validation_data[0]):
                    vx, vy = validation_data[0], validation_data[1]
                    vbatch = kwargs.get("validation_batch_size") or 32
                    vds = _numpy_dataset(vx, vy, None, vbatch, False, 0)
                    validation_data = _slice_batches(
                        vds, patcher.rank, patcher.size,
                        drop_last=0 < len(vx) % vbatch < patcher.size)
                    kwargs.pop("validation_batch_size", None)
                elif isinstance(validation_data, patcher.tf.data.Dataset):
                    validation_data = _slice_batches(validation_data, patcher.rank, patcher.size)
            if patcher.rank != 0 and not patcher.o.no_io:
                verbose = 0
            return original(model, x=x, y=y, batch_size=batch_size, epochs=epochs,
                            verbose=verbose, callbacks=callbacks,
                            validation_split=validation_split, validation_data=validation_data,
                            shuffle=shuffle, sample_weight=sample_weight, **kwargs)

        keras.Model.fit = fit

    def evaluate(self):
        keras = self.keras
        original = keras.Model.evaluate
        patcher = self

        @functools.wraps(original)
        def evaluate(model, x=None, y=None, batch_size=None, verbose="auto", **kwargs):
            sample_weight = kwargs.pop("sample_weight", None)
            sharded = patcher.shard(x, y, sample_weight, batch_size, False)
            if sharded is not None:
                x, y, batch_size = sharded, None, None
            else:
                kwargs["sample_weight"] = sample_weight
            if patcher.rank != 0 and not patcher.o.no_io:
                verbose = 0
            result = original(model, x=x, y=y, batch_size=batch_size, verbose=verbose, **kwargs)
            return _average_result(result)

        keras.Model.evaluate = evaluate

    def compile(self):
        keras = self.keras
        original = keras.Model.compile
        patcher = self

        @functools.wraps(original)
        def compile(model, *args, **kwargs):
            if kwargs.get("jit_compile", "auto") not in (False, None):
                patcher.say_once("xla", "jit_compile turned off: concord's ops have no XLA kernel")
            kwargs["jit_compile"] = False
            return original(model, *args, **kwargs)

        keras.Model.compile = compile

    def io(self):
        if self.rank == 0:
            return
        keras = self.keras
        for cls, method in ((keras.Model, "save"), (keras.Model, "save_weights")):
            setattr(cls, method, lambda *a, **k: None)
        keras.saving.save_model = lambda *a, **k: None
        writers = tuple(getattr(keras.callbacks, n) for n in
                        ("ModelCheckpoint", "TensorBoard", "CSVLogger", "BackupAndRestore")
                        if hasattr(keras.callbacks, n))
        original_fit = keras.Model.fit

        @functools.wraps(original_fit)
        def fit(model, *args, callbacks=None, **kwargs):
            callbacks = [c for c in (callbacks or []) if not isinstance(c, writers)]
            return original_fit(model, *args, callbacks=callbacks, **kwargs)

        keras.Model.fit = fit
        sys.stdout = open(os.devnull, "w")


def _share_cores():
    """Gives each rank its share of the node's cores for TensorFlow's thread
    pools (unless the user chose): N ranks each running a pool as wide as the
    machine oversubscribe it, and the gradient exchange waits on the slowest."""
    local = int(os.environ.get("MPI_LOCALNRANKS", "1"))  # set by MPICH's mpiexec
    if local <= 1:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    share = max(1, (cores or 1) // local)
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(share))
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", str(max(1, min(2, share))))
    os.environ.setdefault("OMP_NUM_THREADS", str(share))


def main(argv=None):
    o = _parse(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _share_cores()
    from concord import tensorflow as ctf
    ctf.init()
    p = _Patcher(o)
    if not o.no_optimizers:
        p.optimizers()
    if not o.no_fit:
        p.fit()
    if not o.no_evaluate:
        p.evaluate()
    if not o.no_compile:
        p.compile()
    if not o.no_io:
        p.io()
    sys.argv = [o.script] + o.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(o.script)))
    runpy.run_path(o.script, run_name="__main__")


if __name__ == "__main__":
    main()
