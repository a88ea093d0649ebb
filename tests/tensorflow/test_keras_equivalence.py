"""The same unmodified Keras script, trained by one process and by
`concordrun -np 2`, ends with the same weights and loss history."""
import csv
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("concord.tensorflow")

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "train_keras.py")


def clean_env():
    # A test may itself run under mpiexec: the children must not join its job.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPIR_", "MPICH_"))}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def run(cmd, timeout=600):
    p = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{cmd} failed:\n{p.stdout[-3000:]}\n{p.stderr[-5000:]}"
    return p


def history(out):
    with open(os.path.join(out, "history.csv")) as f:
        return [{k: float(v) for k, v in row.items() if v != "NA"} for row in csv.DictReader(f)]


def weights(out):
    sys.path.insert(0, HERE)
    import train_keras
    model = train_keras.build_model()
    model.load_weights(os.path.join(out, "final.weights.h5"))
    return model.get_weights()


@pytest.mark.parametrize("optimizer,data", [("sgd", "numpy"), ("adam", "numpy"),
                                            ("sgd", "dataset")])
def test_two_ranks_train_the_same_model(tmp_path, optimizer, data):
    single, dist = str(tmp_path / "single"), str(tmp_path / "dist")
    run([sys.executable, SCRIPT, single, "--optimizer", optimizer, "--data", data])
    concordrun = shutil.which("concordrun")
    assert concordrun, "concordrun is not installed (pip install .)"
    p = run([concordrun, "-np", "2", "python", SCRIPT, dist, "--optimizer", optimizer,
             "--data", data])
    assert p.stdout.count("Epoch 3/3") == 1  # only rank 0 reports progress
    # Only rank 0 writes: checkpoints and saves named after the rank.
    assert sorted(os.listdir(dist)) == ["ckpt-rank0.weights.h5", "final-rank0.weights.h5",
                                        "final.weights.h5", "history.csv"]

    h1, h2 = history(single), history(dist)
    assert len(h1) == len(h2) == 3
    for a, b in zip(h1, h2):
        for key in ("loss", "mae"):
            np.testing.assert_allclose(b[key], a[key], rtol=1e-5, err_msg=key)
    for w1, w2 in zip(weights(single), weights(dist)):
        np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-6)
