"""An ordinary Keras script with no concord in it. Run it as it is, or
data-parallel on N ranks without changing a line:

    python3 examples/keras_train.py
    concordrun -np 2 python3 examples/keras_train.py
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import keras  # noqa: E402

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(4096, 32)).astype("float32")
labels = (x[:, :4].sum(axis=1) > 0).astype("int32") + (x[:, 4:8].sum(axis=1) > 0)

model = keras.Sequential([
    keras.layers.Input((32,)),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dense(3, activation="softmax"),
])
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
model.fit(x, labels, batch_size=128, epochs=4, validation_data=(x[:512], labels[:512]),
          verbose=2)
loss, accuracy = model.evaluate(x, labels, batch_size=256, verbose=0)
print(f"final loss {loss:.4f}, accuracy {accuracy:.4f}")
model.save_weights("/tmp/concord-demo.weights.h5")  # rank 0 only under concordrun
