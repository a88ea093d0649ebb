"""The same unmodified Keras script (train_keras_torch.py), trained by
one process and by `KERAS_BACKEND=torch concordrun -np 2` (concord.torch.run),
ends with the same weights and loss history; each rank trained on its half of
the data (also from a DataLoader and a PyDataset), only rank 0 wrote,
TensorFlow was never imported, and inputs that cannot be sharded are an error
that says so. --accumulate 2 with half the batch trains the same model as the
full batch."""
import csv
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "train_keras_torch.py")
CONCORDRUN = [sys.executable, "-m", "concord.launcher"]  # the concordrun entry point
# float32 (Keras on torch computes its matmuls in float32 even with floatx
# float64: its type promotion turns float64 into float32, as JAX's default
# does): two ranks sum each batch's gradients in another order than one
# process (two means of 16 samples averaged instead of one mean of 32), about
# 6e-8 relative per rounding, carried through 24 steps with momentum. Measured:
# 1.2e-7 absolute at most on the weights, 1e-7 relative on the metrics.
RTOL, ATOL = 1e-5, 1e-6


# What `import concord.torch` set in this process (a test before this one may
# have imported it): the job's ranks must choose their own, or rank 0's store
# would try to listen on the port this process's store holds.
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                      "MASTER_PORT")


def clean_env():
    # The test may itself run under mpiexec: the children must not join its job.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPIR_", "MPICH_", "OMPI_"))
           and k not in TORCHRUN_VARIABLES}
    # A crash in a child shows its Python stack (faulthandler).
    env.update(KERAS_BACKEND="torch", TF_CPP_MIN_LOG_LEVEL="2", PYTHONFAULTHANDLER="1")
    return env


def start(cmd):
    return subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, timeout=300):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, f"{p.args} failed:\n{out[-3000:]}\n{err[-5000:]}"
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three runs' output folders (and the distributed run's stdout), run
    side by side: most of their time is importing Keras and torch."""
    d = {name: tmp_path_factory.mktemp(name) for name in ("single", "accumulate", "dist")}
    runs = [start([sys.executable, SCRIPT, str(d["single"]), "--cases"]),
            start([sys.executable, "-m", "concord.torch.run", "--accumulate", "2", SCRIPT,
                   str(d["accumulate"]), "--batch-size", "16"]),
            start(CONCORDRUN + ["-np", "2", "python", SCRIPT, str(d["dist"]), "--cases"])]
    outputs = [finish(p) for p in runs]
    return d, outputs[2]


def history(out):
    with open(os.path.join(out, "history.csv")) as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def weights(out, rank=0):
    with np.load(os.path.join(out, f"weights-rank{rank}.npz")) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


def result(out, rank=0):
    with open(os.path.join(out, f"rank-{rank}.json")) as f:
        return json.load(f)


def assert_same_training(reference, got, keys=("loss", "mae", "val_loss", "val_mae")):
    h1, h2 = history(reference), history(got)
    assert len(h1) == len(h2) == 3
    for a, b in zip(h1, h2):
        for key in keys:
            np.testing.assert_allclose(b[key], a[key], rtol=RTOL, err_msg=key)
    for w1, w2 in zip(weights(reference), weights(got)):
        np.testing.assert_allclose(w2, w1, rtol=RTOL, atol=ATOL)


def test_two_ranks_train_the_same_model(runs):
    d, stdout = runs
    assert_same_training(d["single"], d["dist"])
    for w0, w1 in zip(weights(d["dist"], 0), weights(d["dist"], 1)):
        np.testing.assert_array_equal(w1, w0)  # every rank holds the same model
    np.testing.assert_allclose(result(d["dist"])["evaluate"][:2],
                               result(d["single"])["evaluate"][:2], rtol=RTOL)


def test_each_rank_trains_on_its_half(runs):
    d, _ = runs
    assert result(d["single"])["samples_seen"] == 256
    assert [result(d["dist"], r)["samples_seen"] for r in (0, 1)] == [128, 128]


def test_only_rank_0_reports_and_writes(runs):
    d, stdout = runs
    assert stdout.count("Epoch 3/3") == 1
    assert stdout.count("evaluate [") == 1
    assert sorted(f for f in os.listdir(d["dist"]) if f.endswith(".h5")) == \
        ["ckpt-rank0.weights.h5", "final-rank0.weights.h5", "final.weights.h5"]


def test_the_torch_path_does_not_import_tensorflow(runs):
    d, _ = runs
    assert [result(d["dist"], r)["tensorflow_imported"] for r in (0, 1)] == [False, False]


def test_inputs_it_cannot_shard_are_an_error(runs):
    d, _ = runs
    assert result(d["single"])["errors"] == {"generator": None, "batch_1": None, "reader_y": None}
    for r in (0, 1):
        errors = result(d["dist"], r)["errors"]
        assert "fit()'s x on Keras's torch backend: a builtins.generator cannot be split" in \
            errors["generator"]
        assert "torch.utils.data.DataLoader" in errors["generator"]  # what to use instead
        assert "batch_size 1 is smaller than the number of ranks (2)" in errors["batch_1"]
        assert "from a concord.data reader hold each rank's share already" in errors["reader_y"]


def test_weighted_and_ratio_metrics_are_one_process_s(runs):
    # Computed from the metrics' state summed over ranks, not the ranks'
    # results averaged (which for these was up to 3% off one process's: AUC).
    d, _ = runs
    for case in ("sample_weight", "class_weight"):
        one = result(d["single"])["weighted"][case]
        assert sorted(one["history"]) == ["auc", "loss", "mae", "precision", "val_auc",
                                          "val_loss", "val_mae", "val_precision"]
        for r in (0, 1):
            got = result(d["dist"], r)["weighted"][case]
            for key, values in one["history"].items():
                np.testing.assert_allclose(got["history"][key], values, rtol=RTOL, err_msg=key)
            np.testing.assert_allclose(got["evaluate"], one["evaluate"], rtol=RTOL)
            assert sorted(got["evaluate_dict"]) == sorted(one["evaluate_dict"])
            for key, value in one["evaluate_dict"].items():
                np.testing.assert_allclose(got["evaluate_dict"][key], value, rtol=RTOL,
                                           err_msg=key)


def test_terminate_on_nan_stops_every_rank_after_the_same_batch(runs):
    # Alone, the rank whose share held the inf stopped after batch 2 and the
    # other waited for it in the next exchange until the stall timeout.
    d, _ = runs
    one = result(d["single"])["nan"]
    assert one == {"batches": [0, 1, 2], "epochs": 1}
    assert [result(d["dist"], r)["nan"] for r in (0, 1)] == [one, one]


def test_a_rank_that_stops_early_ends_in_a_timeout_not_a_hang():
    # Rank 1 stops after its second step and waits in the epoch's metrics
    # (concord's engine); rank 0 waits in the next step's gradient all_reduce
    # (torch.distributed), which waited 30 minutes (the group's default
    # timeout, not CONCORD_STALL_TIMEOUT_S) while rank 1 had failed after 5 s
    # and then waited for it in MPI_Finalize.
    script = os.path.join(HERE, "..", "tensorflow", "stall_case.py")
    env = dict(clean_env(), CONCORD_STALL_TIMEOUT_S="5", CONCORD_STALL_WARNING_S="2")
    p = subprocess.run(CONCORDRUN + ["-np", "2", "python", script], env=env,
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "fit returned" not in out, out
    assert "rank 1 did not reach this call within 5 s" in out, out  # rank 0's all_reduce
    # Rank 1's metrics: its own timeout, or rank 0's engine ending first.
    assert re.search(r"\[rank1\]: concord\._errors\.Error: concord: rank 1: .*"
                     r"(ranks \[0\] did not submit it within 5 s|the engine shut down first)",
                     out), out


def test_dataloader_and_pydataset_batches_are_split_too(runs):
    d, _ = runs
    with np.load(os.path.join(d["single"], "inputs-rank0.npz")) as one, \
            np.load(os.path.join(d["dist"], "inputs-rank0.npz")) as r0, \
            np.load(os.path.join(d["dist"], "inputs-rank1.npz")) as r1:
        assert sorted(one.files) == sorted(r0.files) and len(one.files) == 16
        for kind in ("dataloader", "pydataset"):
            assert one[f"{kind}_seen"] == 256 and r0[f"{kind}_seen"] == r1[f"{kind}_seen"] == 128
        # BatchNormalization's moving statistics are averaged over the ranks: the
        # same on both, and the mean the one process's (every batch split evenly).
        for key in ("bn_moving_mean", "bn_moving_variance"):
            np.testing.assert_array_equal(r1[key], r0[key], err_msg=key)
        np.testing.assert_allclose(r0["bn_moving_mean"], one["bn_moving_mean"], rtol=RTOL,
                                   atol=ATOL)
        for key in (k for k in one.files if not k.endswith("_seen") and not k.startswith("bn_")):
            np.testing.assert_allclose(r0[key], one[key], rtol=RTOL, atol=ATOL, err_msg=key)
            np.testing.assert_array_equal(r1[key], r0[key], err_msg=key)


def test_accumulating_two_half_batches_is_one_batch(runs):
    # One process: the exchange is a copy, the accumulation what is tested.
    d, _ = runs
    assert_same_training(d["single"], d["accumulate"])
