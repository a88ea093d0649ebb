"""Horovod-style training scripts of our own, run under concordrun by
test_horovod.py. Each rank writes OUT/rank{r}.npz (its final weights, losses and
what the test checks). Modes:
  fit    Keras fit with BroadcastGlobalVariablesCallback, MetricAverageCallback,
         LearningRateWarmupCallback and BestModelCheckpoint (rank 0 writes)
  tape   a tf.function loop with DistributedGradientTape, broadcast_variables
         after the first step (--compression fp16 sends float16)
  accum  DistributedOptimizer(backward_passes_per_step=K) in a custom loop
  join   uneven batches per rank, ending in hvd.join()
  ops    every collective against numpy references computed from every rank's input
--late-import builds the model before importing concord.horovod."""
import argparse
import os
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("mode", choices=["fit", "tape", "accum", "join", "ops"])
ap.add_argument("out")
ap.add_argument("--compression", default="none")
ap.add_argument("--k", type=int, default=3)
ap.add_argument("--late-import", action="store_true")
a = ap.parse_args()

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

DIM, BATCH = 4, 8
TRUE_W = np.array([[1.5], [-2.0], [0.5], [1.0]], np.float32)


def data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    return x, (x @ TRUE_W + 0.3).astype(np.float32)


def build(seed):
    keras.utils.set_random_seed(seed)  # different initial weights on every rank
    return keras.Sequential([keras.Input((DIM,)), keras.layers.Dense(1)])


def fit_is_concords():
    """Whether keras.Model.fit is concordrun's patch: its code is a file of the concord
    package, not merely a path that names concord (as keras's own is in a venv inside a
    checkout called concord)."""
    concord_dir = os.path.dirname(os.path.abspath(sys.modules["concord"].__file__))
    return os.path.abspath(keras.Model.fit.__code__.co_filename).startswith(concord_dir + os.sep)


fit_patched_at_start = fit_is_concords()  # concordrun patched keras before the script ran
model = build(1000 + int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", 0))))
if a.mode == "fit" and a.late_import:
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")  # replaced below

import concord.horovod.tensorflow.keras as hvd  # noqa: E402

hvd.init()
r, n = hvd.rank(), hvd.size()
report = {"fit_patched": fit_is_concords(), "fit_patched_at_start": fit_patched_at_start}


def full_loss(x, y):
    """The loss over the whole data set (every rank's), with this rank's model."""
    return float(np.mean((model(x).numpy() - y) ** 2))


def fit():
    x, y = data(64 * n, 0)
    x, y = x[r::n], y[r::n]  # each rank its own shard, as Horovod scripts do
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.02 * n, momentum=0.5))
    model.compile(optimizer=opt, loss="mse")
    cbs = [hvd.callbacks.BroadcastGlobalVariablesCallback(0),
           hvd.callbacks.MetricAverageCallback(),
           hvd.callbacks.LearningRateWarmupCallback(initial_lr=0.02 * n, warmup_epochs=2,
                                                    verbose=1),
           hvd.callbacks.BestModelCheckpoint(monitor="loss",
                                             filepath=os.path.join(a.out, f"best{r}.keras"))]
    h = model.fit(x, y, batch_size=BATCH, epochs=4, callbacks=cbs, verbose=0, shuffle=False)
    report["loss"] = np.array(h.history["loss"])
    report["lr"] = np.array(h.history["lr"])


def tape_loop(steps=8):
    import concord.horovod.tensorflow as hvd_tf
    compression = getattr(hvd_tf.Compression, a.compression)
    opt = keras.optimizers.SGD(0.2)
    x, y = data(BATCH * n * steps, 1)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(xb) - yb) ** 2)
        tape = hvd_tf.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss, grads

    losses = []
    for s in range(steps):
        sl = slice((s * n + r) * BATCH, (s * n + r + 1) * BATCH)
        loss, grads = step(x[sl], y[sl])
        if s == 0:
            hvd_tf.broadcast_variables(model.variables, root_rank=0)
            hvd_tf.broadcast_variables(opt.variables, root_rank=0)
            report["first_grads"] = np.concatenate([g.numpy().ravel() for g in grads])
        losses.append(full_loss(x, y))
    report["loss"] = np.array(losses)


def accum():
    """Every rank starts from rank 0's weights; k micro-batches per update."""
    import concord.horovod.tensorflow as hvd_tf
    hvd_tf.broadcast_variables(model.variables, root_rank=0)
    report["init_w"] = model.get_weights()[0]
    report["init_b"] = model.get_weights()[1]
    opt = hvd_tf.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=a.k,
                                      average_aggregated_gradients=True)
    x, y = data(BATCH * n * a.k * 2, 2)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(xb) - yb) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    for s in range(a.k * 2):  # two updates: micro-step s takes rows of micro-batch s
        base = s * n * BATCH
        step(x[base + r * BATCH: base + (r + 1) * BATCH], y[base + r * BATCH: base + (r + 1) * BATCH])
    report["iterations"] = int(opt.iterations.numpy())


def join():
    import concord.horovod.tensorflow as hvd_tf
    hvd_tf.broadcast_variables(model.variables, root_rank=0)
    opt = keras.optimizers.SGD(0.2)
    x, y = data(BATCH * (4 + n), 3)
    losses = []
    for s in range(2 + r):  # rank r runs 2 + r steps
        xb, yb = x[(s + r) * BATCH:(s + r + 1) * BATCH], y[(s + r) * BATCH:(s + r + 1) * BATCH]
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(xb) - yb) ** 2)
        tape = hvd_tf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(full_loss(x, y))
    last = hvd_tf.join()
    hvd_tf.broadcast_variables(model.variables, root_rank=last)
    report["last"] = last
    report["loss"] = np.array(losses)


def ops():
    """Rank q's input is base * (q + 1); the references below are numpy's."""
    import concord.horovod.tensorflow as h
    base = np.arange(6, dtype=np.float32).reshape(3, 2) + 1
    mine = base * (r + 1)
    every = [base * (q + 1) for q in range(n)]
    close = np.testing.assert_allclose
    close(h.allreduce(mine).numpy(), np.mean(every, 0), rtol=1e-6)
    close(h.allreduce(mine, average=False).numpy(), np.sum(every, 0), rtol=1e-6)
    close(h.allreduce(mine, op=h.Min).numpy(), base)
    close(h.allreduce(mine, op=h.Max).numpy(), base * n)
    close(h.allreduce(mine, op=h.Product).numpy(), np.prod(every, 0), rtol=1e-6)
    close(h.allreduce(mine, op=h.Sum, prescale_factor=0.5, postscale_factor=3.0).numpy(),
          1.5 * np.sum(every, 0), rtol=1e-6)
    close(h.allreduce(mine, compression=h.Compression.fp16).numpy(), np.mean(every, 0),
          rtol=1e-3)
    g = h.grouped_allreduce([mine, tf.constant([float(r)])], op=h.Sum)
    close(g[0].numpy(), np.sum(every, 0), rtol=1e-6)
    close(g[1].numpy(), [sum(range(n))])
    sparse = tf.IndexedSlices(tf.constant(mine[:1]), tf.constant([r]), tf.constant([n, 2]))
    got = h.allreduce(sparse)  # allgathered, values / size for Average
    close(got.values.numpy(), np.concatenate([e[:1] for e in every]) / n, rtol=1e-6)
    assert got.indices.numpy().tolist() == list(range(n))
    close(h.allgather(tf.constant(mine[:r + 1])).numpy(),
          np.concatenate([e[:q + 1] for q, e in enumerate(every)]))
    close(h.broadcast(tf.constant(mine), root_rank=n - 1).numpy(), every[-1])
    assert h.broadcast_object({"rank": r, "x": [1, 2]}, root_rank=1) == {"rank": 1, "x": [1, 2]}
    assert h.allgather_object(("r", r)) == [("r", q) for q in range(n)]
    # alltoall: rank q sends q + 1 rows to every rank; rank r receives q + 1 from each q.
    rows = np.full((n * (r + 1), 2), r, np.float32)
    received, splits = h.alltoall(tf.constant(rows), splits=[r + 1] * n)
    assert splits.numpy().tolist() == [q + 1 for q in range(n)]
    close(received.numpy(), np.concatenate([np.full((q + 1, 2), q, np.float32)
                                            for q in range(n)]))
    # reducescatter: the sum over ranks, rows split as Horovod (first rows % n one more).
    tall = np.arange(14, dtype=np.float32).reshape(7, 2) * (r + 1)
    total = np.arange(14, dtype=np.float32).reshape(7, 2) * sum(range(1, n + 1))
    bounds = np.cumsum([0] + [7 // n + (1 if q < 7 % n else 0) for q in range(n)])
    close(h.reducescatter(tf.constant(tall), op=h.Sum).numpy(), total[bounds[r]:bounds[r + 1]])
    assert (h.cross_size(), h.cross_rank()) == (n // h.local_size(), r // h.local_size())
    report["ops"] = True


{"fit": fit, "tape": tape_loop, "accum": accum, "join": join, "ops": ops}[a.mode]()
weights = model.get_weights()
np.savez(os.path.join(a.out, f"rank{r}.npz"), **report,
         **{f"w{i}": w for i, w in enumerate(weights)})
print(f"rank {r} done", file=sys.stderr)
