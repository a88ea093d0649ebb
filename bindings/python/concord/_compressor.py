"""What every framework's gradient compression shares (concord.tensorflow.
compression, concord.horovod.torch.compression): Horovod's Compressor
interface and the compressor that sends tensors as they are."""
from __future__ import annotations


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress(tensor, context)."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor
