"""TensorFlow tests: test_ops.py runs under mpiexec (every rank the same tests in
the same order); the equivalence tests are a single driver process."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Under mpiexec (test_ops.py and friends, every rank a pytest process), a tensor
# one rank never submits fails its test after a minute instead of leaving the
# others waiting until CTest's deadline. The single drivers' jobs keep theirs.
if "PMI_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ:
    os.environ.setdefault("CONCORD_STALL_TIMEOUT_S", "60")
