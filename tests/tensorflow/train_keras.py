"""An ordinary Keras training script (nothing concord-specific): the equivalence
tests run it as one process and under concordrun, and compare the results.

    python train_keras.py OUT_DIR [--optimizer sgd|adam] [--data numpy|dataset]
"""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402


def build_model():
    return keras.Sequential([
        keras.layers.Input((8, 8, 1)),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="tanh"),
        keras.layers.Dense(3),
    ])


def data(n=256):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(n, 8, 8, 1)).astype(np.float32)
    w = rng.normal(size=(64, 3)).astype(np.float32)
    y = (x.reshape(n, -1) @ w).astype(np.float32)
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--data", default="numpy")
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()

    keras.utils.set_random_seed(1)
    model = build_model()
    opt = (keras.optimizers.SGD(0.01, momentum=0.5) if args.optimizer == "sgd"
           else keras.optimizers.Adam(0.002))
    model.compile(optimizer=opt, loss="mse", metrics=["mae"])
    x, y = data()
    os.makedirs(args.out, exist_ok=True)
    log = keras.callbacks.CSVLogger(os.path.join(args.out, "history.csv"))
    # Named after the MPI rank (PMI_RANK; absent in a plain run), so the test
    # can see which ranks wrote: only rank 0 may.
    who = os.environ.get("PMI_RANK", "0")
    ckpt = keras.callbacks.ModelCheckpoint(os.path.join(args.out, f"ckpt-rank{who}.weights.h5"),
                                           save_weights_only=True)
    if args.data == "numpy":
        model.fit(x, y, batch_size=32, epochs=args.epochs, shuffle=False, callbacks=[log, ckpt],
                  verbose=2)
    else:
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
        model.fit(ds, epochs=args.epochs, callbacks=[log, ckpt], verbose=2)
    model.save_weights(os.path.join(args.out, "final.weights.h5"))
    model.save_weights(os.path.join(args.out, f"final-rank{who}.weights.h5"))
    print("eval", model.evaluate(x, y, batch_size=64, verbose=0))


if __name__ == "__main__":
    main()
