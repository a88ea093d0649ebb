"""Gradient compression for the exchange: Compression.none and Compression.fp16
(floating tensors travel as float16 and come back in their own dtype)."""
from __future__ import annotations

import tensorflow as tf

from concord._compressor import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Floating tensors of a wider dtype are sent as float16 (half the bytes);
    the result is cast back. Other dtypes are sent unchanged."""

    @staticmethod
    def compress(tensor):
        dtype = tensor.dtype
        if dtype.is_floating and dtype != tf.float16:
            return tf.cast(tensor, tf.float16), dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression:
    """The compressors, by Horovod's names."""
    none = NoneCompressor
    fp16 = FP16Compressor
