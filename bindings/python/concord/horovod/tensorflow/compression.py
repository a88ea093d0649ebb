"""Horovod's compression names (concord.tensorflow.compression holds them)."""
from concord.tensorflow.compression import (  # noqa: F401
    Compression, Compressor, FP16Compressor, NoneCompressor)
