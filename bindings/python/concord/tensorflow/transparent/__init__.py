"""concordrun's transparent mode (python -m concord.tensorflow.run): the command
line (options), input sharding (arrays, sharding), and one module per patched
part (optimizers, fit, evaluate, compile, io, seed), applied and undone by the
Patcher (patcher)."""
