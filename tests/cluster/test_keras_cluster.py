"""The Keras equivalence check across hosts: the same unmodified script trained by
one process and by `concordrun -np 2 -hosts H0,H1` (two network-namespace hosts x
one rank, started by Hydra through netns-exec) ends with the same weights and loss
history, within the single-host test's tolerance. Run by tests/cluster/run-ci on
the cluster it made (CONCORD_CLUSTER); reuses tests/tensorflow's script and helpers."""
import os
import shlex
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tensorflow"))

pytest.importorskip("tensorflow")
pytest.importorskip("concord.tensorflow")
from test_keras_equivalence import SCRIPT, assert_same_history_and_weights, run  # noqa: E402

CLUSTER = os.environ.get("CONCORD_CLUSTER", "ccl")
HOSTS = [f"{CLUSTER}-h0", f"{CLUSTER}-h1"]


def test_two_hosts_train_the_same_model_as_one_process(tmp_path):
    if not os.path.exists(f"/run/concord-cluster/{CLUSTER}/hosts"):
        pytest.skip(f"no cluster '{CLUSTER}' (tests/cluster/cluster-up)")
    single, dist = str(tmp_path / "single"), str(tmp_path / "dist")
    run([sys.executable, SCRIPT, single, "--optimizer", "adam", "--data", "numpy"])
    concordrun = shutil.which("concordrun")
    assert concordrun, "concordrun is not installed (pip install .)"
    launch = [concordrun, "-np", "2", "-hosts", ",".join(HOSTS), "-launcher", "ssh",
              "-launcher-exec", os.path.join(HERE, "netns-exec"),
              "python", SCRIPT, dist, "--optimizer", "adam", "--data", "numpy"]
    # concordrun (and so mpiexec) runs on host 0, under the stage's loud deadline.
    cmd = [os.path.join(HERE, "run-timed"), "400", os.path.join(HERE, "netns-exec"), HOSTS[0],
           f"cd {shlex.quote(os.getcwd())} && " + shlex.join(launch)]
    p = run(cmd, timeout=450)
    assert p.stdout.count("Epoch 3/3") == 1  # only rank 0 reports progress
    assert_same_history_and_weights(single, dist)
