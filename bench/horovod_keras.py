"""Training throughput of one Keras model three ways (bench/horovod_throughput runs it):

    concordrun -np 2 python bench/horovod_keras.py hvd          # Horovod-style, concord.horovod
    concordrun -np 2 python bench/horovod_keras.py hvd-fp16     # the same, Compression.fp16
    concordrun -np 2 python bench/horovod_keras.py transparent  # plain Keras, transparent mode

An MLP 784-512-256-10 on synthetic data (no download), global batch 128, one warm-up epoch
then a timed one. Rank 0 prints one JSON line: mode, ranks, samples/s of the timed epoch."""
import argparse
import json
import os
import sys
import time

import numpy as np
import keras

ap = argparse.ArgumentParser()
ap.add_argument("mode", choices=["hvd", "hvd-fp16", "transparent"])
ap.add_argument("--samples", type=int, default=16384)
ap.add_argument("--batch", type=int, default=128, help="global batch")
a = ap.parse_args()

rng = np.random.default_rng(0)
x = rng.normal(size=(a.samples, 784)).astype(np.float32)
y = rng.integers(0, 10, size=a.samples)
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                          keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
callbacks, batch, rank, size = [], a.batch, 0, 1
if a.mode.startswith("hvd"):
    import concord.horovod.tensorflow.keras as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    x, y, batch = x[rank::size], y[rank::size], a.batch // size
    compression = hvd.Compression.fp16 if a.mode == "hvd-fp16" else hvd.Compression.none
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * size), compression=compression)
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
else:
    opt = keras.optimizers.SGD(0.01)
    rank = int(os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    size = int(os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
model.compile(optimizer=opt, loss=loss, jit_compile=False)


class EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = time.perf_counter() - self.start


timer = EpochTimer()
model.fit(x, y, batch_size=batch, epochs=1, verbose=0, callbacks=callbacks)  # warm-up
model.fit(x, y, batch_size=batch, epochs=1, verbose=0, callbacks=[timer], shuffle=False)
if rank == 0:
    print(json.dumps({"mode": a.mode, "ranks": size,
                      "samples_per_s": round(a.samples / timer.seconds, 1)}), file=sys.stderr,
          flush=True)
