"""Horovod's API on concord, for TensorFlow 2.21 / Keras 3.

    import concord.horovod.tensorflow as hvd          # was: import horovod.tensorflow as hvd
    import concord.horovod.tensorflow.keras as hvd    # was: import horovod.tensorflow.keras as hvd
    import concord.horovod.keras as hvd               # was: import horovod.keras as hvd

Run with ``concordrun -np N python train.py``. docs/HOROVOD.md lists every Horovod
name: provided, provided with a difference, or not provided (those raise an error
naming the feature).
"""
