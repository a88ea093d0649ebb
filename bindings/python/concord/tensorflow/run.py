"""Runs an unmodified Keras training script data-parallel over MPI ranks.

    concordrun -np N python train.py args...
    concordrun -np N python -m package.train args...
    mpiexec.mpich -n N python -m concord.tensorflow.run [options] train.py args...

What is patched (each part can be switched off, see --help):
  optimizers   every Keras optimizer's apply() averages gradients over ranks
               first (the outermost optimizer only, so a LossScaleOptimizer's
               skip decision agrees everywhere); covers fit() and custom loops
               with tape.gradient + optimizer.apply_gradients
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

import argparse
import functools
import itertools
import math
import os
import runpy
import sys
import threading

_PARTS = ("optimizers", "fit", "evaluate", "compile", "seed", "io")


def _parse(argv):
    ap = argparse.ArgumentParser(prog="python -m concord.tensorflow.run",
                                 description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--per-rank-batch", action="store_true",
                    help="batch_size is per rank (weak scaling) instead of global")
    for part in _PARTS:
        ap.add_argument(f"--no-{part}", action="store_true", help=f"do not patch {part}")
    ap.add_argument("script", nargs="?", help="the training script (or -m MODULE)")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    # -m MODULE, as python takes it: the module and everything after it are the
    # program's, not ours.
    for i, a in enumerate(argv):
        if a == "-m":
            if i + 1 >= len(argv):
                ap.error("-m needs a module name")
            o = ap.parse_args(argv[:i])
            if o.script is not None:
                ap.error(f"give a script or -m MODULE, not both ({o.script!r} and -m)")
            o.module, o.args = argv[i + 1], argv[i + 2:]
            return o
        if not a.startswith("-"):
            break
    o = ap.parse_args(argv)
    if o.script is None:
        ap.error("a script (or -m MODULE) is required")
    o.module = None
    return o


# -- numpy inputs ------------------------------------------------------------

def _as_tuples(s):
    """Lists become tuples, recursively: tf.data takes a list for one tensor
    (fit([x1, x2], y) means two inputs), a tuple for a structure."""
    if isinstance(s, (list, tuple)) and not hasattr(s, "_fields"):
        return tuple(_as_tuples(i) for i in s)
    if isinstance(s, dict):
        return {k: _as_tuples(v) for k, v in s.items()}
    return s


def _is_numpy_like(s):
    """A numpy array, or a (nested) list/tuple/dict of them."""
    import numpy as np
    import tensorflow as tf
    if s is None:
        return False
    leaves = tf.nest.flatten(_as_tuples(s))
    return bool(leaves) and all(isinstance(a, np.ndarray) and a.ndim >= 1 for a in leaves)


def _numpy_inputs(x, y, sample_weight):
    """Whether fit/evaluate's (x, y, sample_weight) can become a sharded dataset."""
    if not _is_numpy_like(x):
        return False
    if y is None:
        return sample_weight is None  # (x, sample_weight) has no dataset form
    return _is_numpy_like(y) and (sample_weight is None or _is_numpy_like(sample_weight))


def _num_samples(x):
    import tensorflow as tf
    return len(tf.nest.flatten(_as_tuples(x))[0])


def _split_arrays(arrays, validation_split):
    """Keras's validation_split on arrays: the last fraction, before shuffling
    (keras.src.trainers.data_adapters.array_slicing.train_validation_split)."""
    import tensorflow as tf
    n = _num_samples(arrays[0])
    split_at = int(math.floor(n * (1.0 - validation_split)))
    if split_at == 0 or split_at == n:
        raise ValueError(
            f"Training data contains {n} samples, which is not sufficient to split it into a "
            f"validation and training set as specified by `validation_split={validation_split}`. "
            "Either provide more data, or a different value for the `validation_split` argument.")

    def part(a, b):
        return tuple(None if s is None else tf.nest.map_structure(lambda t: t[a:b], _as_tuples(s))
                     for s in arrays)

    return part(0, split_at), part(split_at, n)


def _floatx(s):
    """Floating arrays in Keras's floatx, as Keras's own array adapter casts them."""
    import keras
    import numpy as np
    import tensorflow as tf
    floatx = np.dtype(keras.backend.floatx())
    if s is None:
        return None
    return tf.nest.map_structure(
        lambda a: a.astype(floatx) if np.issubdtype(a.dtype, np.floating) and a.dtype != floatx
        else a, s)


def _numpy_dataset(x, y, sample_weight, batch, seed):
    """Batches of the arrays: in order when seed is None, else in a new
    permutation every epoch (every iteration of the dataset). The permutation
    depends on seed and the epoch only (a stateless index shuffle), not on TF's
    global seed, which a script may set differently on each rank: with the same
    seed every rank draws the same permutation, so a global batch holds the same
    samples everywhere and the ranks' strided shares partition it."""
    import tensorflow as tf
    x, y, sample_weight = (_floatx(_as_tuples(s)) for s in (x, y, sample_weight))
    parts = (x,) if y is None else (x, y) if sample_weight is None else (x, y, sample_weight)
    if seed is None:
        return tf.data.Dataset.from_tensor_slices(parts).batch(batch)
    n = _num_samples(x)
    tensors = tf.nest.map_structure(tf.constant, parts)
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)  # counts the iterations

    def permutation(_):
        key = tf.stack([tf.constant(seed, tf.int64), epoch.assign_add(1)])
        return tf.random.experimental.index_shuffle(tf.range(n, dtype=tf.int64), key,
                                                    tf.constant(n - 1, tf.int64))

    order = (tf.data.Dataset.from_tensors(0).map(permutation).unbatch()
             .apply(tf.data.experimental.assert_cardinality(n)))
    return order.batch(batch).map(
        lambda idx: tf.nest.map_structure(lambda t: tf.gather(t, idx), tensors))


def _static_batch(ds):
    """The batch dimension of a dataset's elements where it is static, else None."""
    import tensorflow as tf
    leaves = tf.nest.flatten(ds.element_spec)
    shape = getattr(leaves[0], "shape", None) if leaves else None
    if shape is None or shape.rank is None or shape.rank == 0:
        return None
    return shape[0]


def _slice_batches(ds, rank, size):
    """Rank r's strided share of every batch of a batched dataset (the element
    structure and the cardinality kept): samples r, r+N, ... No rank may get an
    empty batch, and every rank must run the same number of steps: a batch of k
    < N samples (the last one) is shared, rank r takes its sample r mod k. (For
    k = 1 the averaged gradient is that sample's, as in one process.)"""
    import tensorflow as tf

    def cut(e):
        n = tf.shape(tf.nest.flatten(e)[0])[0]
        start = rank % tf.maximum(n, 1)
        return tf.nest.map_structure(lambda t: t[start::size], e)

    if isinstance(ds.element_spec, tuple):  # tf.data passes a tuple's parts as arguments
        return ds.map(lambda *e: cut(e))
    return ds.map(cut)


def _build_from_spec(model, spec):
    """Builds a model whose layers are not built yet (a subclassed model, say)
    from the input's element spec, symbolically, as Keras itself does under a
    distribution strategy: so its variables exist, and can be broadcast, before
    the first step. Without a strategy Keras builds in the first step, after
    on_train_begin. Best effort (Keras's private _symbolic_build): where it
    cannot, the broadcast waits for the end of the first step."""
    from concord.tensorflow import _model_built
    if _model_built(model):
        return
    build = getattr(model, "_symbolic_build", None)
    if build is None:
        return
    try:
        build(data_batch=spec)
    except Exception:  # noqa: BLE001  (Keras builds in the first step instead)
        pass


def _average_result(result):
    """evaluate()'s scalar, list or dict, averaged over ranks (same structure);
    the same call order on every rank gives the same names."""
    from concord import size
    from concord.tensorflow import _average_over_ranks
    if size() == 1:
        return result
    name = f"concord.run/evaluate/{next(_names)}"
    if isinstance(result, dict):
        keys = list(result)
        averaged = _average_over_ranks([float(result[k]) for k in keys], name)
        return {k: float(v) for k, v in zip(keys, averaged)}
    if isinstance(result, (list, tuple)):
        return [float(v) for v in _average_over_ranks([float(v) for v in result], name)]
    return float(_average_over_ranks([float(result)], name)[0])


def _moving_statistics(model, keras):
    """The moving statistics of the model's trainable BatchNormalization layers."""
    from concord.tensorflow import _model_layers
    out = []
    for layer in _model_layers(model):
        if isinstance(layer, keras.layers.BatchNormalization) and layer.trainable:
            out += [layer.moving_mean, layer.moving_variance]
    return out


_names = itertools.count()


def _from_rank0(value, name):
    """Rank 0's integer `value` on every rank (every rank must call it)."""
    import numpy as np

    import concord
    return int(concord.broadcast(np.array([value], np.int64), 0, name=name)[0])


def _wait_for_every_rank(what, failed=False):
    """A barrier through concord's engine: a rank that never arrives makes rank 0
    name this tensor in the engine's stall warning (CONCORD_STALL_WARNING_S).
    Returns whether any rank passed failed=True, so that all ranks take the same
    path after it."""
    import numpy as np

    import concord
    flag = np.array([1.0 if failed else 0.0], np.float32)
    total = concord.allreduce_async(
        flag, name=f"concord.run: {what} is collective, every rank must call it "
                   f"(#{next(_names)})").wait()
    return bool(total[0] > 0)


class _Patcher:
    def __init__(self, options):
        import keras
        import tensorflow as tf

        from concord import tensorflow as ctf

        self.keras, self.tf, self.ctf = keras, tf, ctf
        self.o = options
        self.rank, self.size = ctf.rank(), ctf.size()
        self._said = set()
        self._undo = []  # (owner, name, original, missing-marker), in patch order
        self._used = False  # a patched fit/evaluate/optimizer step ran
        self._local = threading.local()  # .saving: depth of nested saves in this thread
        self._fitting = 0  # fit() calls under way (in any thread: callbacks may run on others)

    def _set(self, owner, name, value):
        """owner.name = value, remembered so that undo() can put the original back
        (the first original where a name is patched twice)."""
        missing = object()
        self._undo.append((owner, name, owner.__dict__.get(name, missing)
                           if isinstance(owner, type) else getattr(owner, name, missing), missing))
        setattr(owner, name, value)

    def undo(self, what):
        """Undoes every patch: the script uses the explicit API (`what`), which
        averages and shards itself; the patches would do it a second time."""
        for owner, name, original, missing in reversed(self._undo):
            if original is missing:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._undo.clear()
        if self._used:
            raise RuntimeError(
                f"concord: the script uses {what} after training under concordrun's transparent "
                "mode has begun (fit, evaluate or an optimizer step ran first): use the explicit "
                "API from the start (import it before training), or not at all")
        self.say_once("explicit", f"the script uses {what}: running it without the transparent "
                                  "patches (no input sharding, no gradient averaging, no I/O "
                                  "changes by concordrun)")

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
                self._set(cls, "apply", self.ctf._averaged_apply(cls.__dict__["apply"]))
        # Classes that inherit apply() from above the Keras Optimizer.
        if "apply" not in base.__dict__:
            original = base.apply
            self._set(base, "apply", self.ctf._averaged_apply(original))

    # -- data ----------------------------------------------------------------
    def global_batch(self, batch_size):
        batch = batch_size or 32
        if self.o.per_rank_batch:
            return batch * self.size
        if batch < self.size:
            raise ValueError(
                f"concord: batch_size {batch} is smaller than the number of ranks ({self.size}): "
                "batch_size is the global batch, split over the ranks, and every rank needs at "
                f"least one sample of every batch. Use batch_size >= {self.size}, fewer ranks, "
                "or --per-rank-batch.")
        if batch % self.size:
            self.say_once("batch", f"batch_size {batch} is not a multiple of {self.size} "
                                   "ranks: ranks get batches differing by one sample")
        return batch

    def shuffle_seed(self):
        """A seed for one fit()'s shuffle, the same on every rank: each rank draws
        one from numpy's global generator (so the ranks' generators stay in step,
        and a script's keras.utils.set_random_seed makes runs repeatable), and
        rank 0's is taken."""
        import numpy as np
        return _from_rank0(np.random.randint(0, 2**31 - 1), "concord.run/shuffle-seed")

    def shard_numpy(self, x, y, sample_weight, batch_size, shuffle):
        batch = self.global_batch(batch_size)
        seed = self.shuffle_seed() if shuffle else None
        return _slice_batches(_numpy_dataset(x, y, sample_weight, batch, seed), self.rank,
                              self.size)

    def shard_dataset(self, ds):
        static = _static_batch(ds)
        if static is not None and static < self.size:
            raise ValueError(
                f"concord: the dataset's batches hold {static} samples, fewer than the number of "
                f"ranks ({self.size}): the batch is the global batch, split over the ranks, and "
                f"every rank needs at least one sample of it. Batch by {self.size} or more.")
        return _slice_batches(ds, self.rank, self.size)

    def shard(self, x, y, sample_weight, batch_size, shuffle):
        """(x, y, sample_weight, from_numpy) for fit/evaluate inputs, or None when
        they are left alone."""
        if self.size == 1:
            return None
        from concord import data  # read by concord.data: each rank holds its share already
        if data.is_sharded(x):
            return data.fit_inputs(x, y, sample_weight, lambda: self.global_batch(batch_size),
                                   shuffle)
        if _numpy_inputs(x, y, sample_weight):
            return self.shard_numpy(x, y, sample_weight, batch_size, shuffle), None, None, True
        if isinstance(x, self.tf.data.Dataset):
            return self.shard_dataset(x), y, sample_weight, False
        self.say_once("input", f"inputs of type {type(x).__name__} are not sharded: every rank "
                               "takes all of them")
        return None

    def shard_validation(self, validation_data, batch_size):
        """fit()'s validation_data, sharded (a dataset where it was arrays), or
        None when left alone."""
        from concord import data  # read by concord.data: each rank holds its share already
        if data.is_sharded(validation_data):
            return data.validation_inputs(validation_data, lambda: self.global_batch(batch_size))
        if isinstance(validation_data, self.tf.data.Dataset):
            return self.shard_dataset(validation_data)
        if isinstance(validation_data, (tuple, list)) and 1 <= len(validation_data) <= 3:
            vx, vy, vw = (tuple(validation_data) + (None, None))[:3]
            if _numpy_inputs(vx, vy, vw):
                return self.shard_numpy(vx, vy, vw, batch_size, False)
        return None

    # -- fit / evaluate -------------------------------------------------------
    def fit(self):
        ctf, keras = self.ctf, self.keras
        original = keras.Model.fit
        patcher = self

        class BroadcastState(ctf.BroadcastInitialWeights):
            """Rank 0's variables and epoch to start from, after every other
            callback's on_train_begin (a BackupAndRestore runs on rank 0 only)."""

            def on_train_begin(self, logs=None):
                super().on_train_begin(logs)
                epoch = getattr(self.model, "_initial_epoch", None)
                got = _from_rank0(-1 if epoch is None else int(epoch),
                                  f"concord.run/epoch/{next(_names)}")
                self.model._initial_epoch = None if got < 0 else got

        class AverageMovingStatistics(keras.callbacks.Callback):
            """BatchNormalization's moving mean and variance, which each rank
            updates from its own share of the batches, averaged over ranks before
            validation and at the end of every epoch: every rank then holds the
            same model (what rank 0 saves is what every rank evaluates)."""

            def on_epoch_begin(self, epoch, logs=None):
                self._stale = True

            def on_test_begin(self, logs=None):
                self._average()

            def on_epoch_end(self, epoch, logs=None):
                self._average()

            def _average(self):
                if not getattr(self, "_stale", False):
                    return
                self._stale = False
                variables = _moving_statistics(self.model, keras)
                if variables:
                    names = [f"concord.run/moving/{i}/{getattr(v, 'path', v.name)}"
                             for i, v in enumerate(variables)]
                    averaged = ctf.grouped_allreduce(
                        [patcher.tf.convert_to_tensor(v) for v in variables], op="avg",
                        names=[n.replace(":", "_") for n in names])
                    for v, a in zip(variables, averaged):
                        v.assign(a)

        @functools.wraps(original)
        def fit(model, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
                validation_split=0.0, validation_data=None, shuffle=True, sample_weight=None,
                **kwargs):
            patcher._used = True
            callbacks = [ctf.MetricAverage(), AverageMovingStatistics()] + \
                list(callbacks or []) + [BroadcastState()]
            if patcher.size > 1:
                if (validation_split and validation_data is None
                        and _numpy_inputs(x, y, sample_weight)):
                    (x, y, sample_weight), validation_data = _split_arrays(
                        (x, y, sample_weight), validation_split)
                    validation_split = 0.0
                vbatch = kwargs.get("validation_batch_size") or batch_size
                sharded = patcher.shard(x, y, sample_weight, batch_size, shuffle)
                if sharded is not None:
                    x, y, sample_weight, from_numpy = sharded
                    if from_numpy:
                        # The dataset shuffles, with the same seed on every rank.
                        shuffle, batch_size = False, None
                if validation_data is not None:
                    v = patcher.shard_validation(validation_data, vbatch)
                    if v is not None:
                        validation_data = v
                        kwargs.pop("validation_batch_size", None)
                    elif batch_size is None and vbatch is not None:
                        # Left alone, it keeps the script's batch size (not
                        # Keras's default, which batch_size=None would give).
                        kwargs.setdefault("validation_batch_size", vbatch)
                if isinstance(x, patcher.tf.data.Dataset):
                    _build_from_spec(model, x.element_spec)
            if patcher.rank != 0 and not patcher.o.no_io:
                verbose = 0
            return original(model, x=x, y=y, batch_size=batch_size, epochs=epochs,
                            verbose=verbose, callbacks=callbacks,
                            validation_split=validation_split, validation_data=validation_data,
                            shuffle=shuffle, sample_weight=sample_weight, **kwargs)

        self._set(keras.Model, "fit", fit)

    def evaluate(self):
        keras = self.keras
        original = keras.Model.evaluate
        patcher = self

        @functools.wraps(original)
        def evaluate(model, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                     **kwargs):
            patcher._used = True
            if kwargs.get("_use_cached_eval_dataset"):
                # fit()'s validation: its data is sharded already, and the val_
                # metrics are averaged with the epoch's logs.
                return original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                                sample_weight=sample_weight, **kwargs)
            sharded = patcher.shard(x, y, sample_weight, batch_size, False)
            if sharded is not None:
                x, y, sample_weight, from_numpy = sharded
                if from_numpy:
                    batch_size = None
            if patcher.rank != 0 and not patcher.o.no_io:
                verbose = 0
            result = original(model, x=x, y=y, batch_size=batch_size, verbose=verbose,
                              sample_weight=sample_weight, **kwargs)
            return _average_result(result)

        self._set(keras.Model, "evaluate", evaluate)

    def compile(self):
        keras = self.keras
        # Patched on the class that defines it (Keras's Trainer): Keras takes a
        # compile() that differs from Trainer.compile for a custom one and then
        # loads saved models uncompiled.
        owner = next(c for c in keras.Model.__mro__ if "compile" in c.__dict__)
        original = owner.__dict__["compile"]
        patcher = self

        @functools.wraps(original)
        def compile(model, *args, **kwargs):
            if kwargs.get("jit_compile", "auto") not in (False, None):
                patcher.say_once("xla", "jit_compile turned off: concord's ops have no XLA kernel")
            kwargs["jit_compile"] = False
            return original(model, *args, **kwargs)

        self._set(owner, "compile", compile)

    # -- seed ------------------------------------------------------------------
    def seed(self):
        """Rank 0's random seed on every rank, before the script runs: an
        unseeded ds.shuffle() (or np.random) then draws the same permutation
        everywhere, so the strided shards partition the data."""
        if self.size == 1:
            return
        mine = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
        seed = _from_rank0(mine, "concord.run/seed")
        self.keras.utils.set_random_seed(seed)
        self.say_once("seed", f"random seed {seed} on every rank (keras.utils.set_random_seed; "
                              "a seed the script sets replaces it)")

    # -- io ----------------------------------------------------------------------
    def _collective_write(self, fn, what):
        """fn (a save) made collective: rank 0 writes, then every rank waits for
        it. Inside fit() rank 0 writes alone (its writer callbacks run on rank 0
        only); nested calls (Model.save -> saving.save_model) write once."""
        patcher, local = self, self._local

        @functools.wraps(fn)
        def write(*args, **kwargs):
            depth = getattr(local, "saving", 0)
            if depth or patcher._fitting:
                return fn(*args, **kwargs) if patcher.rank == 0 else None
            if patcher.rank != 0:
                if _wait_for_every_rank(what):
                    # Rank 0's write raised: raise here too, so that a script
                    # that catches it goes on the same way on every rank.
                    raise RuntimeError(f"concord: {what} failed on rank 0 (its error says why)")
                return None
            local.saving = depth + 1
            try:
                result = fn(*args, **kwargs)
            except BaseException:
                local.saving = depth
                _wait_for_every_rank(what, failed=True)
                raise
            local.saving = depth
            _wait_for_every_rank(what)
            return result

        write._concord_collective = True
        return write

    def _patch_saving(self):
        import importlib
        keras = self.keras
        for cls, name in ((keras.Model, "save"), (keras.Model, "save_weights"),
                          (keras.Model, "export")):
            fn = getattr(cls, name, None)
            if fn is not None and not getattr(fn, "_concord_collective", False):
                self._set(cls, name, self._collective_write(fn, f"Model.{name}"))
        modules = [keras.saving, keras.models]
        try:
            modules.append(importlib.import_module("keras.src.saving.saving_api"))
        except ImportError:  # pragma: no cover - another Keras layout
            pass
        wrapped = {}
        for module in modules:
            for name in ("save_model", "save_weights"):
                fn = getattr(module, name, None)
                if fn is None or getattr(fn, "_concord_collective", False):
                    continue
                if fn not in wrapped:
                    wrapped[fn] = self._collective_write(fn, f"keras.saving.{name}")
                self._set(module, name, wrapped[fn])

    def io(self):
        keras = self.keras
        patcher = self
        if self.size > 1:
            self._patch_saving()
        writers = tuple(getattr(keras.callbacks, n) for n in
                        ("ModelCheckpoint", "TensorBoard", "CSVLogger", "BackupAndRestore")
                        if hasattr(keras.callbacks, n))
        original_fit = keras.Model.fit

        @functools.wraps(original_fit)
        def fit(model, *args, callbacks=None, **kwargs):
            if patcher.rank != 0:
                callbacks = [c for c in (callbacks or []) if not isinstance(c, writers)]
            patcher._fitting += 1
            try:
                result = original_fit(model, *args, callbacks=callbacks, **kwargs)
            finally:
                patcher._fitting -= 1
            if patcher.size > 1 and not patcher._fitting:
                # What rank 0's callbacks wrote is complete on every rank.
                _wait_for_every_rank("fit")
            return result

        self._set(keras.Model, "fit", fit)
        if self.rank != 0:
            self._set(sys, "stdout", open(os.devnull, "w"))


def _share_cores():
    """Gives each rank its share of the node's cores for TensorFlow's thread
    pools (unless the user chose): N ranks each running a pool as wide as the
    machine oversubscribe it, and the gradient exchange waits on the slowest."""
    # Ranks on this node, as MPICH's and Open MPI's launchers say it.
    local = int(os.environ.get("MPI_LOCALNRANKS") or
                os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or "1")
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
    # A rank that leaves training early (a callback stopping it on its own loss,
    # an error a script catches) would leave the others waiting for ever in the
    # next gradient exchange: give up after 30 minutes, naming the missing ranks.
    # Long enough for rank 0 to write a large checkpoint while the others wait.
    os.environ.setdefault("CONCORD_STALL_TIMEOUT_S", "1800")
    from concord import tensorflow as ctf
    ctf._start()
    p = _Patcher(o)
    ctf._explicit_hooks.append(p.undo)
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
    if not o.no_seed:
        p.seed()
    if o.module is not None:
        sys.argv = [o.module] + o.args  # runpy puts the module's file name first
        sys.path.insert(0, os.getcwd())  # as python -m does
        runpy.run_module(o.module, run_name="__main__", alter_sys=True)
        return
    sys.argv = [o.script] + o.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(o.script)))
    runpy.run_path(o.script, run_name="__main__")


if __name__ == "__main__":
    main()
