"""A plain Keras script (no concord, but for --then-import): test_horovod.py runs it in one process and
under concordrun's transparent mode (--compression fp16, --accumulate K). Each
process saves its final weights as OUT/w-RANK.npz (RANK from the MPI launcher,
0 alone)."""
import argparse
import os

import numpy as np
import keras

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--then-import", action="store_true",
                help="import concord.horovod after fit(): an error under concordrun")
a = ap.parse_args()

keras.utils.set_random_seed(5)
rng = np.random.default_rng(4)
x = rng.normal(size=(96, 4)).astype(np.float32)
y = (x @ np.array([[1.5], [-2.0], [0.5], [1.0]], np.float32) + 0.3).astype(np.float32)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
h = model.fit(x, y, batch_size=a.batch, epochs=2, shuffle=False, verbose=0)
rank = os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
late_error = ""
if a.then_import:
    try:
        import concord.horovod.tensorflow  # noqa: F401
    except RuntimeError as e:
        late_error = str(e)
np.savez(os.path.join(a.out, f"w-{rank}.npz"), loss=np.array(h.history["loss"]),
         late_error=late_error,
         iterations=int(model.optimizer.iterations.numpy()),
         **{f"arr_{i}": w for i, w in enumerate(model.get_weights())})
