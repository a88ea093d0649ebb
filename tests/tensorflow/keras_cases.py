"""Ordinary Keras usage that concordrun must get right (nothing concord-specific):
test_keras_equivalence.py runs it as one process and under concordrun -np 2 and
compares what each rank records in OUT/results-RANK.json.

    python keras_cases.py OUT
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = sys.argv[1]
RANK = os.environ.get("PMI_RANK", "0")  # absent in a plain run
N_BN = 129  # samples of the BatchNormalization case: a last batch of 1
results = {}


def as_list(weights):
    return [np.asarray(w).tolist() for w in weights]


# An unseeded shuffle before the script seeds anything.
results["permutation"] = [int(i) for i in
                          tf.data.Dataset.range(64).shuffle(64).as_numpy_iterator()]
keras.utils.set_random_seed(1)
rng = np.random.default_rng(3)


# Multi-input model, list inputs, sample weights; validation from a tf.data
# dataset, a 3-tuple of arrays with sample weights, and a PyDataset.
def multi_input_model():
    a, b = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    h = keras.layers.Dense(8, activation="tanh")(keras.layers.Concatenate()([a, b]))
    return keras.Model([a, b], keras.layers.Dense(1)(h))


class Validation(keras.utils.PyDataset):
    def __init__(self, x, y):
        super().__init__()
        self.x, self.y = x, y

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return tuple(x[i * 8:(i + 1) * 8] for x in self.x), self.y[i * 8:(i + 1) * 8]


x1, x2 = rng.normal(size=(64, 4)), rng.normal(size=(64, 3))  # float64, as users pass them
y = (x1.sum(1, keepdims=True) - x2[:, :1]).astype(np.float32)
w = rng.uniform(0.5, 2.0, 64).astype(np.float32)
vx1, vx2 = rng.normal(size=(16, 4)).astype(np.float32), rng.normal(size=(16, 3)).astype(np.float32)
vy, vw = vx1[:, :1] * 2, rng.uniform(0.5, 2.0, 16).astype(np.float32)
model = multi_input_model()
model.compile(keras.optimizers.SGD(0.05), loss="mse")
history = {}
for validation in (tf.data.Dataset.from_tensor_slices(((vx1, vx2), vy)).batch(8),
                   ([vx1, vx2], vy, vw), Validation((vx1, vx2), vy)):
    h = model.fit([x1, x2], y, sample_weight=w, batch_size=16, epochs=1, shuffle=False,
                  validation_data=validation, verbose=0)
    for k, v in h.history.items():
        history.setdefault(k, []).extend(v)
results["multi_input"] = {"history": history, "weights": as_list(model.get_weights())}

# Two outputs (list y) and validation_split: 71 samples, the first 49 train
# (batches of 16, 16, 16 and 1), the last 22 validate.
inp = keras.Input((5,))
h = keras.layers.Dense(8, activation="tanh")(inp)
model = keras.Model(inp, [keras.layers.Dense(1, name="one")(h),
                         keras.layers.Dense(2, name="two")(h)])
model.compile(keras.optimizers.SGD(0.05), loss=["mse", "mse"])
x = rng.normal(size=(71, 5)).astype(np.float32)
h = model.fit(x, [x[:, :1] * 2, x[:, 1:3] - 1], batch_size=16, epochs=2, shuffle=False,
              validation_split=0.3, verbose=0)
results["two_outputs"] = {"history": h.history, "weights": as_list(model.get_weights())}


# BatchNormalization on a dataset of known length whose last batch is smaller
# than the number of ranks; then a checkpoint written during fit, loaded after.
class Steps(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.seen = getattr(self, "seen", []) + [0]

    def on_train_batch_end(self, batch, logs=None):
        self.seen[-1] += 1


def bn_model():
    return keras.Sequential([keras.layers.Input((6,)), keras.layers.Dense(8),
                             keras.layers.BatchNormalization(), keras.layers.Dense(1)])


x = rng.normal(size=(N_BN, 6)).astype(np.float32)
y = x[:, :1] * 3 + 1
model = bn_model()
model.compile(keras.optimizers.SGD(0.05), loss="mse")
steps = Steps()
ckpt = os.path.join(OUT, "bn.weights.h5")
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
h = model.fit(ds, epochs=2, verbose=0, callbacks=[
    steps, keras.callbacks.ModelCheckpoint(ckpt, save_weights_only=True)])
restored = bn_model()
restored.load_weights(ckpt)
bn = model.layers[1]
results["batchnorm"] = {
    "steps": steps.seen, "loss": h.history["loss"],
    "evaluate": model.evaluate(ds, verbose=0),
    "prediction": model.predict(x, verbose=0)[:, 0].tolist(), "y": y[:, 0].tolist(),
    "moving": as_list([bn.moving_mean, bn.moving_variance]),
    "checkpoint_matches": all(np.array_equal(a, b) for a, b in
                              zip(model.get_weights(), restored.get_weights()))}


def error(fn):
    try:
        fn()
    except ValueError as e:
        return str(e)
    return None


tiny = bn_model()
tiny.compile("sgd", loss="mse")
results["errors"] = {
    "numpy_batch_1": error(lambda: tiny.fit(x[:8], y[:8], batch_size=1, verbose=0)),
    "dataset_batch_1": error(lambda: tiny.fit(
        tf.data.Dataset.from_tensor_slices((x[:8], y[:8])).batch(1, drop_remainder=True),
        verbose=0))}

# Save, then load at once on every rank, through each saving entry point.
saved = {}
for name, save in (
        ("Model.save", lambda p: model.save(p)),
        ("keras.saving.save_model", lambda p: keras.saving.save_model(model, p)),
        ("keras.models.save_model", lambda p: keras.models.save_model(model, p))):
    path = os.path.join(OUT, name + ".keras")
    save(path)
    loaded = keras.models.load_model(path)
    saved[name] = loaded.compiled and all(
        np.array_equal(a, b) for a, b in zip(model.get_weights(), loaded.get_weights()))
path = os.path.join(OUT, "model.weights.h5")
model.save_weights(path)
loaded = bn_model()
loaded.load_weights(path)
saved["Model.save_weights"] = all(np.array_equal(a, b) for a, b in zip(model.get_weights(),
                                                                        loaded.get_weights()))
results["saved"] = saved
# A save that fails (no such directory) raises on every rank, so a script that
# catches it goes on the same way everywhere.
try:
    model.save(os.path.join(OUT, "no-such-dir", "m.keras"))
    results["failed_save_raised"] = False
except Exception:  # noqa: BLE001
    results["failed_save_raised"] = True


# BackupAndRestore: training interrupted after the first epoch, then resumed by
# a fresh model (as a restarted script would).
class Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
            raise RuntimeError("interrupted")


def small_model():
    model = keras.Sequential([keras.layers.Input((5,)), keras.layers.Dense(4, activation="tanh"),
                              keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.01), loss="mse")
    return model


x = rng.normal(size=(64, 5)).astype(np.float32)
y = x[:, :1] - x[:, 1:2]
backup = os.path.join(OUT, "backup")
try:
    small_model().fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0,
                      callbacks=[keras.callbacks.BackupAndRestore(backup), Interrupt()])
except RuntimeError:
    pass
keras.utils.set_random_seed(2)  # a fresh start, unlike the interrupted one's
model = small_model()
h = model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(backup)])
results["resumed"] = {"loss": h.history["loss"], "weights": as_list(model.get_weights())}

# fit(shuffle=True) on arrays, with a different seed on each rank (as scripts
# written for Horovod do): the samples each rank trains on, epoch by epoch.
class Recorder(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.seen = []

    def call(self, x):
        return self.dense(x)

    def train_step(self, data):
        self.seen.extend(int(v) for v in data[0].numpy()[:, 0])
        return super().train_step(data)


class EpochMarks(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        self.model.seen.append(-1)


keras.utils.set_random_seed(100 + int(RANK))
recorder = Recorder()
recorder.compile(keras.optimizers.SGD(0.01), loss="mse", run_eagerly=True)
ids = np.arange(40, dtype=np.float32).reshape(40, 1)
recorder.fit(ids, np.zeros((40, 1), np.float32), batch_size=8, epochs=2, shuffle=True, verbose=0,
             callbacks=[EpochMarks()])
recorder.fit(ids, np.zeros((40, 1), np.float32), batch_size=8, epochs=1, shuffle=True, verbose=0,
             callbacks=[EpochMarks()])
epochs, current = [], []
for mark in recorder.seen:
    if mark == -1:
        epochs.append(current)
        current = []
    else:
        current.append(mark)
results["shuffled_epochs"] = epochs  # 3: two of the first fit(), one of the second


# TerminateOnNaN, one label inf: its sample lies in one rank's share of batch 2
# only; every rank must stop after that batch, as one process does.
class Batches(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.seen = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(batch)


x = rng.normal(size=(40, 3)).astype(np.float32)
y = x.sum(1, keepdims=True)
y[21] = np.inf
model = keras.Sequential([keras.layers.Input((3,)), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.01), loss="mse")
batches = Batches()
h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
              callbacks=[keras.callbacks.TerminateOnNaN(), batches])
results["nan"] = {"batches": batches.seen, "epochs": len(h.history["loss"])}


# Metrics weighted by sample_weight or class_weight (a ratio of sums, which
# the ranks' average of their own is not), Precision and AUC (ratios of
# counts), with weighted validation data and evaluate() in both forms: one
# model, trained on with each in turn (traced once).
x = rng.normal(size=(64, 4)).astype(np.float32)
y = (x[:, :1] + 0.5 * rng.normal(size=(64, 1)) > 0).astype(np.float32)
vx = rng.normal(size=(32, 4)).astype(np.float32)
vy, vw = (vx[:, :1] > 0).astype(np.float32), np.linspace(2, 0.5, 32).astype(np.float32)
keras.utils.set_random_seed(4)
model = keras.Sequential([keras.layers.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
model.compile(keras.optimizers.SGD(0.1), loss="binary_crossentropy",
              metrics=[keras.metrics.Precision(name="precision"), keras.metrics.AUC(name="auc")],
              weighted_metrics=["mae"])
results["weighted"] = {}
for name, weights in (("sample_weight", np.linspace(0.5, 2, 64).astype(np.float32)),
                      ("class_weight", {0: 1.0, 1: 3.0})):
    h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                  validation_data=(vx, vy, vw), **{name: weights})
    results["weighted"][name] = {
        "history": h.history, "weights": as_list(model.get_weights()),
        "evaluate": model.evaluate(vx, vy, sample_weight=vw, batch_size=8, verbose=0),
        "evaluate_dict": model.evaluate(vx, vy, sample_weight=vw, batch_size=8, verbose=0,
                                        return_dict=True)}

with open(os.path.join(OUT, f"results-{RANK}.json"), "w") as f:
    json.dump(results, f)
