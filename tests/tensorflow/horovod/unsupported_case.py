"""Every Horovod feature concord does not provide raises an error naming it
(one process; run by test_horovod.py). Prints the features checked."""
import pytest

import keras
import tensorflow as tf

import concord.horovod.keras as hvd_keras
import concord.horovod.tensorflow as hvd
import concord.horovod.tensorflow.keras as hvd_tfk
from concord.horovod._unsupported import HorovodFeatureNotProvided

hvd.init()
v = tf.Variable([1.0, 2.0])
checked = []


def expect(error, words, fn, *args, **kwargs):
    with pytest.raises(error) as e:
        fn(*args, **kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    checked.append(words[0])


NP = HorovodFeatureNotProvided
for module in (hvd, hvd_tfk, hvd_keras):
    expect(NP, ["elastic training"], getattr, module.elastic, "run")
    expect(NP, ["elastic training"], getattr, module.elastic, "KerasState")
expect(NP, ["run_elastic"], hvd.run_elastic, lambda: None)
expect(NP, ["Adasum"], hvd.allreduce, tf.ones([2]), op=hvd.Adasum)
expect(NP, ["Adasum"], hvd.DistributedOptimizer, keras.optimizers.SGD(), op=hvd.Adasum)
expect(NP, ["Adasum"], hvd.DistributedGradientTape, tf.GradientTape(), op=hvd.Adasum)
expect(NP, ["ProcessSet"], hvd.ProcessSet, [0])
expect(NP, ["add_process_set"], hvd.add_process_set, [0])
expect(NP, ["remove_process_set"], hvd.remove_process_set, hvd.global_process_set)
expect(NP, ["process_set="], hvd.allreduce, tf.ones([2]), process_set=object())
expect(NP, ["process_set="], hvd.broadcast_variables, [v], 0, process_set=object())
expect(NP, ["init(process_sets"], hvd.init, process_sets=[[0]])
expect(NP, ["init(comm"], hvd.init, comm=[5])
expect(NP, ["start_timeline", "CONCORD_TIMELINE"], hvd.start_timeline, "/tmp/t.json")
expect(NP, ["start_timeline", "CONCORD_TIMELINE"], hvd.stop_timeline)
expect(NP, ["PartialDistributedGradientTape"], hvd.PartialDistributedGradientTape,
       tf.GradientTape())
expect(NP, ["PartialDistributedOptimizer"], hvd_tfk.PartialDistributedOptimizer,
       keras.optimizers.SGD())
expect(NP, ["SyncBatchNormalization"], hvd.SyncBatchNormalization)
expect(NP, ["BroadcastGlobalVariablesHook"], hvd.BroadcastGlobalVariablesHook, 0)
expect(NP, ["broadcast_object_fn"], hvd.broadcast_object_fn)
expect(NP, ["size_op"], hvd.size_op)
expect(NP, ["tf.compat.v1.train"], hvd.DistributedOptimizer,
       tf.compat.v1.train.GradientDescentOptimizer(0.1))
expect(RuntimeError, ["broadcast_global_variables", "eager"], hvd_tfk.broadcast_global_variables,
       0)
expect(ValueError, ["BestModelCheckpoint", "filepath"],
       hvd_tfk.callbacks.BestModelCheckpoint)
expect(ValueError, ["gradient_predivide_factor"], hvd.DistributedOptimizer,
       keras.optimizers.SGD(), op=hvd.Sum, gradient_predivide_factor=2.0)
expect(ValueError, ["backward_passes_per_step"], hvd.DistributedOptimizer,
       keras.optimizers.SGD(), backward_passes_per_step=0)
expect(ValueError, ["op=", "average="], hvd.allreduce, tf.ones([2]), average=True, op=hvd.Sum)
expect(ValueError, ["root_rank"], hvd.broadcast, tf.ones([2]), 3)
opt = hvd.DistributedOptimizer(keras.optimizers.SGD())
expect(ValueError, ["wrapped already"], hvd.DistributedOptimizer, opt)
print("checked:", len(checked), checked)
