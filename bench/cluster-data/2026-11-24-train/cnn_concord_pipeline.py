"""examples/fashion_mnist_cnn.py run as it is, in one process, except that fit()
takes its (x, y) through concord.data's dataset (tensors gathered per batch,
tf.data autotuning off): the like-for-like baseline for the 2-rank runs, whose
transparent mode feeds fit() from the same function
(concord.data._tf.array_dataset, via fit_inputs). Prints the example's output,
its "samples/s" line included.

    taskset -c 0 python3 cnn_concord_pipeline.py [example args: --epochs 3 ...]
"""
import functools
import os
import runpy
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
from concord.data._tf import array_dataset  # noqa: E402

example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                       "examples", "fashion_mnist_cnn.py")
original_fit = keras.Model.fit


@functools.wraps(original_fit)
def fit(model, x=None, y=None, batch_size=None, **kwargs):
    return original_fit(model, array_dataset(x, y, None, batch_size, shuffle=True), **kwargs)


keras.Model.fit = fit
sys.path.insert(0, os.path.dirname(example))  # its fashion_mnist_data module
sys.argv = [example] + sys.argv[1:]
runpy.run_path(example, run_name="__main__")
