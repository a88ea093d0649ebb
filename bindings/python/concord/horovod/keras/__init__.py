"""horovod.keras's names on concord: with Keras 3 this is the same API as
concord.horovod.tensorflow.keras.

    import concord.horovod.keras as hvd     # was: import horovod.keras as hvd
"""
import sys as _sys

from concord.horovod.tensorflow import keras as _tf_keras

globals().update({k: v for k, v in vars(_tf_keras).items() if not k.startswith("__")})
from concord.horovod.keras import callbacks  # noqa: E402,F401

elastic = _tf_keras.elastic
_sys.modules[__name__ + ".elastic"] = elastic
