"""Fashion-MNIST from Debian's dataset-fashion-mnist package (IDX files, no
downloads): apt-get install dataset-fashion-mnist (scripts/setup does).

Read with concord.data's IDX reader: one process reads everything; under
concordrun (or mpiexec) each rank reads only its share, and the transparent
mode does not shard it again."""
import os

from concord import data

ROOT = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
train_total = None  # training samples over all ranks, set by load()


def _read(images, labels, limit=None):
    path = os.path.join(ROOT, images)
    if not os.path.exists(path):
        raise SystemExit(f"{path} not found: apt-get install dataset-fashion-mnist "
                         "(or set FASHION_MNIST_DIR)")
    reader = data.open(path, label=labels, limit=limit)
    x, y = reader.read()
    return reader.total, (x.astype("float32") / 255.0, y.astype("int32"))


def load(limit=None):
    """(x_train, y_train), (x_test, y_test): images as float32 in [0, 1], shape
    (n, 28, 28); this rank's share of them (all of them in one process)."""
    global train_total
    train_total, train = _read("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", limit)
    return train, _read("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")[1]
