"""examples/fashion_mnist_cnn.py with its input through concord.data's dataset
(tensors gathered per batch, tf.data autotuning off), for one process: the
like-for-like baseline for the 2-rank runs, whose transparent mode feeds fit()
from the same function (concord.data._tf.array_dataset, via fit_inputs). Prints
the example's "samples/s" line.

    taskset -c 0 python3 cnn_concord_pipeline.py [--epochs 3] [--limit 20000]
"""
import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
from concord.data._tf import array_dataset  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "examples"))
import fashion_mnist_data  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--batch-size", type=int, default=128)
ap.add_argument("--limit", type=int, default=20000)
args = ap.parse_args()

keras.utils.set_random_seed(0)
(x_train, y_train), _ = fashion_mnist_data.load(args.limit)
x_train = x_train[..., None]
model = keras.Sequential([
    keras.layers.Input((28, 28, 1)),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Conv2D(32, 3, activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Flatten(),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
ds = array_dataset(x_train, y_train, None, args.batch_size, shuffle=True)
start = time.perf_counter()
model.fit(ds, epochs=args.epochs, verbose=2)
seconds = time.perf_counter() - start
print(f"samples/s {fashion_mnist_data.train_total * args.epochs / seconds:.0f}")
