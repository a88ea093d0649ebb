"""concordrun's transparent mode on Keras's torch backend (python -m
concord.torch.run): the patcher (patcher), the tensors it moves over ranks
through concord's torch.distributed backend (exchange), the inputs it shards
(inputs), the callbacks it adds to fit() (callbacks), and one module per
patched part (optimizers, fit, evaluate; compile, io and seed are
concord.transparent's, the same on every backend)."""
