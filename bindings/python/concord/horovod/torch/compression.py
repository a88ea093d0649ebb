"""Horovod's gradient compression for torch: Compression.none, and
Compression.fp16 (floating tensors travel as float16, half the bytes, and come
back in their own dtype)."""
from __future__ import annotations

import torch

from concord._compressor import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Floating tensors of another dtype are sent as float16; the result is cast
    back. Other dtypes are sent unchanged."""

    @staticmethod
    def compress(tensor):
        if tensor.is_floating_point() and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    """The compressors, by Horovod's names."""
    none = NoneCompressor
    fp16 = FP16Compressor
