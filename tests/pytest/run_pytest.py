"""pytest for CTest: fails with a clear message where the concord package is not
installed (instead of every test erroring on its import), then runs pytest with the
suite's options and these arguments."""
import importlib.util
import sys

import pytest

if importlib.util.find_spec("concord") is None or importlib.util.find_spec("concord._concord") is None:
    sys.exit(f"{sys.executable} cannot import concord: install the package first "
             "(scripts/install-python, or python3 -m pip install .)")
# --durations: the slowest tests of each run, to see where CI time goes.
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--durations=5", *sys.argv[1:]]))
