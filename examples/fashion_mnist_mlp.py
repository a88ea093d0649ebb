"""An ordinary Keras MLP on Fashion-MNIST (no concord in it but the
data reader, concord.data, in fashion_mnist_data.py). Data-parallel on N
ranks without changing a line:

    python3 examples/fashion_mnist_mlp.py [--epochs 3] [--limit 60000]
    concordrun -np 2 python3 examples/fashion_mnist_mlp.py
"""
import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402

import fashion_mnist_data  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=3)
ap.add_argument("--batch-size", type=int, default=128)
ap.add_argument("--limit", type=int, default=None, help="use the first N training images")
args = ap.parse_args()

keras.utils.set_random_seed(0)
(x_train, y_train), (x_test, y_test) = fashion_mnist_data.load(args.limit)
model = keras.Sequential([
    keras.layers.Input((28, 28)),
    keras.layers.Flatten(),
    keras.layers.Dense(256, activation="relu"),
    keras.layers.Dense(128, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
start = time.perf_counter()
model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs, verbose=2)
seconds = time.perf_counter() - start
print(f"samples/s {fashion_mnist_data.train_total * args.epochs / seconds:.0f}")
loss, accuracy = model.evaluate(x_test, y_test, batch_size=500, verbose=0)
print(f"test loss {loss:.4f}, test accuracy {accuracy:.4f}")
