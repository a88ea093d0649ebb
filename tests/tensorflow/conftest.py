"""TensorFlow tests: test_ops.py runs under mpiexec (every rank the same tests in
the same order); the equivalence tests are a single driver process."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
