"""concordrun's transparent mode, the parts that do not depend on Keras's
backend: the command line (options), the patcher's bookkeeping (patcher), the
rule that splits every global batch over the ranks (batches), numpy inputs
(arrays), agreement and averages through concord's engine (collective), the
script's start (program), and the parts patched alike on every backend (io,
seed, compile, and nan: TerminateOnNaN agreeing over ranks).
concord.tensorflow.run and concord.torch.run build on it; it imports neither
TensorFlow nor torch."""
