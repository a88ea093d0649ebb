"""Run by test_data_transparent.py under concordrun -np 2: Keras fit() on data
a concord.data reader already sharded (arrays, a dataset built on the reader's,
then arrays of which only y is the reader's), recording which samples each rank
trains on, and the error for labels that are not the reader's share."""
import json
import os
import sys

import keras
import numpy as np

import concord
from concord import data as cdata

out = sys.argv[1]
seen = []  # per fit(): per epoch: per step the sample ids


class Recorder(keras.Model):
    def train_step(self, data):
        seen[-1][-1].append(data[0].numpy()[:, 0].astype(int).tolist())
        return super().train_step(data)


class Epochs(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        seen[-1].append([])


inputs = keras.Input((3,))
model = Recorder(inputs, keras.layers.Dense(1)(inputs))
model.compile(optimizer="sgd", loss="mse", run_eagerly=True)

r = cdata.open(os.path.join(out, "x.npy"), label="y.npy")
x, y = r.read()
seen.append([])
model.fit(x / 1.0, y, batch_size=4, epochs=2, shuffle=True, callbacks=[Epochs()], verbose=0,
          validation_data=(x[:6], y[:6]))  # a reader's arrays: batched, not sharded again
seen.append([])
model.fit(r.as_dataset(4, shuffle=True).prefetch(1), epochs=1, callbacks=[Epochs()], verbose=0)
seen.append([])
# np.asarray drops the mark of x alone: y is still the reader's, so is x's share.
model.fit(np.asarray(x) / 1.0, y, batch_size=4, epochs=1, shuffle=False, callbacks=[Epochs()],
          verbose=0)
try:  # the whole data set's labels with this rank's share of the features
    model.fit(x, np.load(os.path.join(out, "y.npy")), batch_size=4, verbose=0)
    mismatch = None
except ValueError as e:
    mismatch = str(e)
with open(os.path.join(out, f"rank{concord.rank()}.json"), "w") as f:
    json.dump({"indices": r.indices.tolist(), "seen": seen, "mismatch": mismatch}, f)
