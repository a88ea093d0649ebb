"""The transparent mode's state on Keras's torch backend: concord.transparent's
patcher, with torch.distributed at hand, and what tells whether Keras itself
averages over ranks."""
from __future__ import annotations

import sys
import types
import weakref

from concord.transparent import patcher as _patcher

# The parts that can be switched off (--no-PART), in the order they are patched.
PARTS = ("optimizers", "fit", "evaluate", "compile", "io", "seed")
_HERE = "concord.torch.transparent"
_SHARED = ("compile", "io", "seed")  # patched alike on every backend: concord.transparent


class Patcher(_patcher.Patcher):
    MODULES = {part: f"concord.transparent.{part}" if part in _SHARED else f"{_HERE}.{part}"
               for part in PARTS}
    jit_reason = "torch.compile would trace concordrun's gradient exchange"
    auto_jit = False  # jit_compile="auto" runs eagerly on torch: nothing to say

    def __init__(self, options):
        import keras
        import torch
        import torch.distributed as dist

        super().__init__(options, keras, dist.get_rank(), dist.get_world_size())
        self.torch, self.dist = torch, dist
        # Optimizers whose gradients Keras has DistributedDataParallel average.
        self.reduced_by_keras = weakref.WeakSet()

    @staticmethod
    def keras_reduces(model):
        """Whether Keras itself averages this model's gradients and metrics over
        ranks. keras-nightly (3.16 on) wraps the model in DistributedDataParallel
        when torch.distributed is initialised (model.ddp_model, made by
        make_train_function/make_test_function) and then sums its metrics'
        states over ranks; Keras 3.15 does neither."""
        return getattr(model, "ddp_model", None) is not None

    @staticmethod
    def keras_reduces_gradients(model):
        """Whether Keras's DistributedDataParallel averages this model's
        gradients: it wrapped the model, and the train_step that runs is Keras's
        own, which calls the wrapped model. A script's own train_step may call
        the model itself, bypassing DDP: then apply() averages them (averaging
        gradients DDP averaged already would change nothing but the time)."""
        if not Patcher.keras_reduces(model):
            return False
        owner = next(c for c in type(model).__mro__ if "train_step" in c.__dict__)
        return owner.__module__.startswith("keras.")

    def set_random_seed(self, seed):
        """keras.utils.set_random_seed, without importing TensorFlow: Keras seeds
        TensorFlow too wherever it is installed (for tf.data pipelines), which
        would load it into every torch run. Where the script has imported
        TensorFlow it is seeded as well."""
        from keras.src.utils import rng_utils
        lazy = getattr(rng_utils, "tf", None)
        if "tensorflow" in sys.modules or lazy is None:
            self.keras.utils.set_random_seed(seed)
            return
        rng_utils.tf = types.SimpleNamespace(available=False)
        try:
            self.keras.utils.set_random_seed(seed)
        finally:
            rng_utils.tf = lazy

    def refuse_keras_distribution(self):
        """A keras.distribution the script set would shard the data and reduce
        a second time (keras-nightly's DataParallel shards inputs itself)."""
        distribution = getattr(self.keras, "distribution", None)
        active = distribution.distribution() if hasattr(distribution, "distribution") else None
        if active is not None:
            raise ValueError(
                f"concord: the script sets a keras.distribution ({type(active).__name__}), and "
                "concordrun's Keras-on-torch mode shards the data and averages the gradients "
                "itself: drop keras.distribution.set_distribution(), or run the script as it is "
                "with concordrun --no-tensorflow")
