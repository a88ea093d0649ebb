"""Rank 1 stops training after its second step (as a callback watching that
rank's own loss would); rank 0 goes on. test_keras_equivalence.py (TensorFlow)
and tests/keras_torch (KERAS_BACKEND=torch) run it under concordrun -np 2 with a
short CONCORD_STALL_TIMEOUT_S and expect both ranks to fail with the timeout
instead of waiting for ever."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402

RANK = int(os.environ.get("PMI_RANK", "0"))


class StopOnRankOne(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if RANK == 1 and batch == 1:
            self.model.stop_training = True


model = keras.Sequential([keras.layers.Input((3,)), keras.layers.Dense(1)])
model.compile(keras.optimizers.SGD(0.01), loss="mse")
x = np.random.default_rng(0).random((64, 3)).astype(np.float32)
model.fit(x, x.sum(1, keepdims=True), batch_size=8, epochs=1, verbose=0,
          callbacks=[StopOnRankOne()])
print(f"rank {RANK}: fit returned", flush=True)
