"""horovod.keras.callbacks on concord (the same callbacks as
concord.horovod.tensorflow.keras.callbacks)."""
from concord.horovod.tensorflow.keras.callbacks import (  # noqa: F401
    BestModelCheckpoint, BroadcastGlobalVariablesCallback, LearningRateScheduleCallback,
    LearningRateWarmupCallback, MetricAverageCallback)
