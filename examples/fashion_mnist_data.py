"""Fashion-MNIST from Debian's dataset-fashion-mnist package (IDX files, no
downloads): apt-get install dataset-fashion-mnist (scripts/setup does)."""
import gzip
import os

import numpy as np

ROOT = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def _idx(name):
    path = os.path.join(ROOT, name)
    if not os.path.exists(path):
        raise SystemExit(f"{path} not found: apt-get install dataset-fashion-mnist "
                         "(or set FASHION_MNIST_DIR)")
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(limit=None):
    """(x_train, y_train), (x_test, y_test): images as float32 in [0, 1], shape (n, 28, 28)."""
    x_train = _idx("train-images-idx3-ubyte.gz").astype("float32") / 255.0
    y_train = _idx("train-labels-idx1-ubyte.gz").astype("int32")
    x_test = _idx("t10k-images-idx3-ubyte.gz").astype("float32") / 255.0
    y_test = _idx("t10k-labels-idx1-ubyte.gz").astype("int32")
    if limit:
        x_train, y_train = x_train[:limit], y_train[:limit]
    return (x_train, y_train), (x_test, y_test)
