"""An ordinary Keras script (nothing concord-specific; Keras picks its backend
from KERAS_BACKEND): the equivalence test runs it as one process and under
concordrun, with KERAS_BACKEND=torch, and compares the results.

    python train_keras_torch.py OUT_DIR [--batch-size 32] [--cases]

Each process seeds its
initializers after its MPI rank (PMI_RANK, absent in a plain run: 0), so the
ranks start from different weights unless rank 0's are broadcast. Besides
Keras's own files (history.csv, checkpoints and weights, which only rank 0 may
write), every process writes its final weights (weights-rank<r>.npz) and
rank-<r>.json: how many samples it trained on, evaluate()'s result, whether
TensorFlow was imported, and with --cases the errors some bad inputs raise,
the history and evaluate() of weighted metrics, Precision and AUC, and
(inputs-rank<r>.npz) the weights after training on a DataLoader and on a
PyDataset, the samples this process saw of them, and a BatchNormalization
layer's moving statistics; and the batches a fit() with TerminateOnNaN ran.
"""
import argparse
import json
import os
import sys

import numpy as np
import keras
from keras import ops

from concord.data import ShardArray

RANK = int(os.environ.get("PMI_RANK", "0"))


class SamplesSeen(keras.metrics.Metric):
    """How many samples this process trained on in the epoch."""

    def __init__(self, name="samples", **kwargs):
        super().__init__(name=name, **kwargs)
        self.seen = self.add_variable(shape=(), initializer="zeros", name="seen")

    def update_state(self, y_true, y_pred, sample_weight=None):
        self.seen.assign_add(ops.cast(ops.shape(y_true)[0], self.seen.dtype))

    def result(self):
        return ops.copy(self.seen)  # not the variable itself, which the next epoch resets


class LastCount(keras.callbacks.Callback):
    """The metric's count after the epoch's last training batch (this process's
    own: Keras may average or sum what it logs over ranks)."""

    def __init__(self, metric):
        super().__init__()
        self.metric, self.count = metric, None

    def on_train_batch_end(self, batch, logs=None):
        self.count = float(ops.convert_to_numpy(self.metric.seen))


def build_model():
    def init(i):
        return keras.initializers.GlorotUniform(seed=7 + 10 * RANK + i)
    return keras.Sequential([
        keras.layers.Input((8, 8, 1)),
        keras.layers.Conv2D(4, 3, activation="relu", kernel_initializer=init(0)),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="tanh", kernel_initializer=init(1)),
        keras.layers.Dense(3, kernel_initializer=init(2)),
    ])


def data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8, 8, 1))
    y = x.reshape(n, -1) @ np.random.default_rng(7).normal(size=(64, 3))
    return x, y


class Batches(keras.utils.PyDataset):
    """The arrays' batches of 32, in order."""

    def __init__(self, x, y):
        super().__init__()
        self.x, self.y = x, y

    def __len__(self):
        return -(-len(self.x) // 32)

    def __getitem__(self, i):
        return self.x[32 * i:32 * i + 32], self.y[32 * i:32 * i + 32]


def other_inputs(x, y):
    """The weights of a new model after one epoch on a torch DataLoader, and
    of another after one on a PyDataset, of the arrays' batches, and how many
    samples this process trained on in each."""
    import torch
    x, y = x.astype("float32"), y.astype("float32")
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.as_tensor(x), torch.as_tensor(y)), batch_size=32)
    out = {}
    for name, batches in (("dataloader", loader), ("pydataset", Batches(x, y))):
        model, seen = build_model(), SamplesSeen()
        count = LastCount(seen)
        model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.5), loss="mse",
                      metrics=[seen])
        model.fit(batches, epochs=1, shuffle=False, verbose=0, callbacks=[count])
        out.update({f"{name}_{i}": w for i, w in enumerate(model.get_weights())})
        out[f"{name}_seen"] = np.array(count.count)
    out.update(batch_norm_statistics(x, y))
    return out


def batch_norm_statistics(x, y):
    """A BatchNormalization layer's moving mean and variance after one epoch.
    It normalises the inputs, so its batch means do not depend on the weights:
    the mean over the ranks' equal shares of a batch is the whole batch's."""
    model = keras.Sequential([keras.layers.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.BatchNormalization(), keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    model.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
    bn = model.layers[1]
    return {"bn_moving_mean": ops.convert_to_numpy(bn.moving_mean),
            "bn_moving_variance": ops.convert_to_numpy(bn.moving_variance)}


def weighted(fit_weights):
    """History and evaluate() (both forms) of metrics weighted by sample_weight
    or class_weight, Precision and AUC, with weighted validation data."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x[:, :1] + 0.5 * rng.normal(size=(64, 1)) > 0).astype("float32")
    vx = rng.normal(size=(32, 4)).astype("float32")
    vy, vw = (vx[:, :1] > 0).astype("float32"), np.linspace(2, 0.5, 32).astype("float32")
    model = keras.Sequential([keras.layers.Input((4,)), keras.layers.Dense(
        1, activation="sigmoid", kernel_initializer=keras.initializers.GlorotUniform(seed=3))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="binary_crossentropy",
                  metrics=[keras.metrics.Precision(name="precision"),
                           keras.metrics.AUC(name="auc")], weighted_metrics=["mae"])
    if fit_weights == "sample_weight":
        fit_weights = {"sample_weight": np.linspace(0.5, 2, 64).astype("float32")}
    else:
        fit_weights = {"class_weight": {0: 1.0, 1: 3.0}}
    h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                  validation_data=(vx, vy, vw), **fit_weights)
    return {"history": h.history,
            "evaluate": model.evaluate(vx, vy, sample_weight=vw, batch_size=8, verbose=0),
            "evaluate_dict": model.evaluate(vx, vy, sample_weight=vw, batch_size=8, verbose=0,
                                            return_dict=True)}


class BatchesSeen(keras.callbacks.Callback):
    """The training batches fit() ran, in order."""

    def on_train_begin(self, logs=None):
        self.seen = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(batch)


def terminate_on_nan():
    """TerminateOnNaN with one label inf, whose sample lies in one rank's share
    of batch 2 only: the batches fit() ran and the epochs it logged."""
    x = np.random.default_rng(5).normal(size=(40, 3)).astype("float32")
    y = x.sum(1, keepdims=True)
    y[21] = np.inf
    model = keras.Sequential([keras.layers.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    batches = BatchesSeen()
    h = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                  callbacks=[keras.callbacks.TerminateOnNaN(), batches])
    return {"batches": batches.seen, "epochs": len(h.history["loss"])}


def bad_inputs(model, x, y):
    """The errors (None: none) of inputs concordrun cannot split over ranks."""
    errors = {}
    cases = {"generator": lambda: model.fit(((x[i:i + 4], y[i:i + 4]) for i in range(0, 8, 4)),
                                            steps_per_epoch=2, verbose=0),
             "batch_1": lambda: model.fit(x[:4], y[:4], batch_size=1, verbose=0),
             # A concord.data reader's labels (its arrays are ShardArray) with plain x.
             "reader_y": lambda: model.fit(x, y.view(ShardArray), batch_size=32, verbose=0)}
    for name, case in cases.items():
        try:
            case()
            errors[name] = None
        except (TypeError, ValueError) as e:
            errors[name] = str(e)
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--cases", action="store_true")
    args = ap.parse_args()

    model = build_model()
    seen = SamplesSeen()
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.5), loss="mse",
                  metrics=["mae", seen])
    x, y = data(256, 1)
    os.makedirs(args.out, exist_ok=True)
    log = keras.callbacks.CSVLogger(os.path.join(args.out, "history.csv"))
    ckpt = keras.callbacks.ModelCheckpoint(
        os.path.join(args.out, f"ckpt-rank{RANK}.weights.h5"), save_weights_only=True)
    count = LastCount(seen)
    model.fit(x, y, batch_size=args.batch_size, epochs=3, shuffle=False, verbose=2,
              validation_data=data(64, 2), callbacks=[log, ckpt, count])
    model.save_weights(os.path.join(args.out, "final.weights.h5"))
    model.save_weights(os.path.join(args.out, f"final-rank{RANK}.weights.h5"))
    np.savez(os.path.join(args.out, f"weights-rank{RANK}.npz"), *model.get_weights())
    result = {"samples_seen": count.count,  # this process's, in the last epoch
              "evaluate": model.evaluate(x, y, batch_size=64, verbose=0),
              "tensorflow_imported": "tensorflow" in sys.modules}
    if args.cases:
        result["errors"] = bad_inputs(model, x, y)
        result["weighted"] = {w: weighted(w) for w in ("sample_weight", "class_weight")}
        result["nan"] = terminate_on_nan()
        np.savez(os.path.join(args.out, f"inputs-rank{RANK}.npz"), **other_inputs(x, y))
    with open(os.path.join(args.out, f"rank-{RANK}.json"), "w") as f:
        json.dump(result, f)
    print("evaluate", result["evaluate"])


if __name__ == "__main__":
    main()
