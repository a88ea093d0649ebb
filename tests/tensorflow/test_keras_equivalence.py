"""The same unmodified Keras script, trained by one process and by
`concordrun -np 2`, ends with the same weights and loss history; keras_cases.py
covers the rest of what the launcher must get right (one run of each)."""
import csv
import json
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
CASES = os.path.join(HERE, "keras_cases.py")


def clean_env():
    # A test may itself run under mpiexec: the children must not join its job.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPIR_", "MPICH_"))}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def run(cmd, timeout=600, env=None):
    p = subprocess.run(cmd, env=dict(clean_env(), **(env or {})), capture_output=True, text=True,
                       timeout=timeout)
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


def assert_same_history_and_weights(single, dist):
    """Three epochs of loss/mae history and the final weights of a distributed run
    match one process's, within the tolerance of float sums in another order."""
    h1, h2 = history(single), history(dist)
    assert len(h1) == len(h2) == 3
    for a, b in zip(h1, h2):
        for key in ("loss", "mae"):
            np.testing.assert_allclose(b[key], a[key], rtol=1e-5, err_msg=key)
    for w1, w2 in zip(weights(single), weights(dist)):
        np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-6)


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

    assert_same_history_and_weights(single, dist)


# -- keras_cases.py: one process, and concordrun -np 2 ----------------------------

@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    single, dist = tmp_path_factory.mktemp("single"), tmp_path_factory.mktemp("dist")
    run([sys.executable, CASES, str(single)])
    concordrun = shutil.which("concordrun")
    assert concordrun, "concordrun is not installed (pip install .)"
    # Ranks that part ways (one stops training, another goes on) fail in a
    # minute, not at the launcher's 30 minutes.
    run([concordrun, "-np", "2", "python", CASES, str(dist)],
        env={"CONCORD_STALL_TIMEOUT_S": "60"})

    def load(d, rank):
        with open(d / f"results-{rank}.json") as f:
            return json.load(f)

    return load(single, 0), [load(dist, 0), load(dist, 1)], dist


def assert_same_training(one, ranks, exact=None):
    """Every rank's weights and history (the keys in `exact`, default all) as
    one process's, within 1e-5."""
    for got in ranks:
        for key, values in one["history"].items():
            if exact is None or key in exact:
                np.testing.assert_allclose(got["history"][key], values, rtol=1e-5, err_msg=key)
        for w1, w2 in zip(one["weights"], got["weights"]):
            np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-6)


def test_unseeded_shuffle_is_the_same_on_every_rank(cases):
    _, (r0, r1), _ = cases
    assert sorted(r0["permutation"]) == list(range(64))
    assert r0["permutation"] == r1["permutation"]


def test_shuffled_epochs_partition_the_data_whatever_each_rank_seeds(cases):
    # Each rank set its own global seed: the ranks must still agree on every
    # epoch's permutation, so their shares partition the samples; and every
    # epoch (also of a second fit()) has a new order.
    one, (r0, r1), _ = cases
    assert [len(e) for e in one["shuffled_epochs"]] == [40, 40, 40]
    for e in one["shuffled_epochs"]:
        assert sorted(e) == list(range(40))
    # (One process is plain Keras, whose order with a global seed set may repeat
    # from epoch to epoch; the launcher's shuffle draws a new one every epoch.)
    for e0, e1 in zip(r0["shuffled_epochs"], r1["shuffled_epochs"]):
        assert len(e0) == len(e1) == 20
        assert sorted(e0 + e1) == list(range(40))
    assert len({tuple(e) for e in r0["shuffled_epochs"]}) == 3, "the same order in two epochs"


def test_a_rank_that_stops_early_ends_in_a_timeout_not_a_hang():
    concordrun = shutil.which("concordrun")
    assert concordrun, "concordrun is not installed (pip install .)"
    env = dict(os.environ, CONCORD_STALL_TIMEOUT_S="5", CONCORD_STALL_WARNING_S="2")
    script = os.path.join(os.path.dirname(__file__), "stall_case.py")
    p = subprocess.run([concordrun, "-np", "2", "python", script], env=env, capture_output=True,
                       text=True, timeout=240)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "fit returned" not in out, out
    assert "have not submitted" in out or "did not submit" in out, out


def test_terminate_on_nan_stops_every_rank_after_the_same_batch(cases):
    # The inf label is in rank 1's share of batch 2: rank 1 alone stopped there,
    # and rank 0 waited in batch 3's gradient exchange until the stall timeout.
    one, ranks, _ = cases
    assert one["nan"] == {"batches": [0, 1, 2], "epochs": 1}
    for r in ranks:
        assert r["nan"] == one["nan"]


def test_list_inputs_sample_weights_and_any_validation_data(cases):
    # fit([x1, x2], y, sample_weight=w) with validation from a tf.data dataset,
    # a 3-tuple (list x, y, sample weights) and a PyDataset.
    one, ranks, _ = cases
    assert len(one["multi_input"]["history"]["val_loss"]) == 3
    assert_same_training(one["multi_input"], [r["multi_input"] for r in ranks])


def test_list_outputs_validation_split_and_a_last_batch_of_one(cases):
    one, ranks, _ = cases
    history = one["two_outputs"]["history"]
    # The weights (the last batch of one sample is shared by both ranks: the
    # same gradient as in one process) and every validation metric agree; the
    # epoch's loss counts that sample once per rank, so it only comes close.
    assert_same_training(one["two_outputs"], [r["two_outputs"] for r in ranks],
                         exact=[k for k in history if k != "loss"])
    for r in ranks:
        np.testing.assert_allclose(r["two_outputs"]["history"]["loss"], history["loss"], rtol=0.05)


def shares(n, batch, ranks):
    """The samples each rank takes: strided within every batch; a batch of k <
    ranks samples is shared (rank r takes its sample r mod k)."""
    out = [[] for _ in range(ranks)]
    for start in range(0, n, batch):
        k = min(batch, n - start)
        for r in range(ranks):
            out[r] += range(start + r % k, start + k, ranks)
    return out


def test_no_rank_gets_an_empty_batch(cases):
    one, ranks, _ = cases
    n, batch = len(one["batchnorm"]["y"]), 32
    assert n % batch == 1  # the last batch: one sample for two ranks
    steps = -(-n // batch)
    assert one["batchnorm"]["steps"] == [steps, steps]
    for r in ranks:
        bn = r["batchnorm"]
        assert bn["steps"] == [steps, steps]  # every rank the same steps
        assert np.isfinite(bn["loss"]).all() and np.isfinite(bn["evaluate"])
        for v in bn["moving"]:
            assert np.isfinite(v).all()
        # Every rank holds the same model (moving statistics averaged)...
        assert bn["moving"] == ranks[0]["batchnorm"]["moving"]
        assert bn["prediction"] == ranks[0]["batchnorm"]["prediction"]
        # ...and evaluate() averages the ranks' means over their shares.
        loss = (np.array(bn["prediction"]) - np.array(bn["y"])) ** 2
        expected = np.mean([loss[s].mean() for s in shares(n, batch, 2)])
        np.testing.assert_allclose(bn["evaluate"], expected, rtol=1e-5)
        assert bn["checkpoint_matches"]  # ModelCheckpoint's file, complete when fit returns


def test_batches_smaller_than_the_ranks_are_an_error(cases):
    one, ranks, _ = cases
    assert one["errors"] == {"numpy_batch_1": None, "dataset_batch_1": None}
    for r in ranks:
        assert "batch_size 1 is smaller than the number of ranks (2)" in \
            r["errors"]["numpy_batch_1"]
        assert "fewer than the number of ranks (2)" in r["errors"]["dataset_batch_1"]


def test_a_save_is_complete_on_every_rank_when_it_returns(cases):
    one, ranks, dist = cases
    for r in [one] + ranks:  # loaded at once, compiled, the same weights
        assert r["saved"] == {"Model.save": True, "keras.saving.save_model": True,
                              "keras.models.save_model": True, "Model.save_weights": True}
    assert all(r["failed_save_raised"] for r in [one] + ranks)
    assert sorted(os.listdir(dist)) == sorted(
        ["Model.save.keras", "keras.saving.save_model.keras", "keras.models.save_model.keras",
         "model.weights.h5", "bn.weights.h5", "results-0.json", "results-1.json"])


def test_backup_and_restore_resumes_every_rank(cases):
    one, ranks, _ = cases
    assert len(one["resumed"]["loss"]) == 2  # epochs 2 and 3 of 3
    for r in ranks:
        np.testing.assert_allclose(r["resumed"]["loss"], one["resumed"]["loss"], rtol=1e-5)
        for w1, w2 in zip(one["resumed"]["weights"], r["resumed"]["weights"]):
            np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-6)


def test_weighted_and_ratio_metrics_are_one_process_s(cases):
    # The ranks' average of their own weighted mae, Precision or AUC was up to
    # 6% off one process's: each is now computed from the state summed over ranks.
    one, ranks, _ = cases
    for case in ("sample_weight", "class_weight"):
        reference = one["weighted"][case]
        assert sorted(reference["history"]) == ["auc", "loss", "mae", "precision", "val_auc",
                                                "val_loss", "val_mae", "val_precision"]
        got = [r["weighted"][case] for r in ranks]
        assert_same_training(reference, got)
        for g in got:
            np.testing.assert_allclose(g["evaluate"], reference["evaluate"], rtol=1e-5)
            assert sorted(g["evaluate_dict"]) == sorted(reference["evaluate_dict"])
            for key, value in reference["evaluate_dict"].items():
                np.testing.assert_allclose(g["evaluate_dict"][key], value, rtol=1e-5,
                                           err_msg=key)


# -- the sharding itself, in this process (rank and size given) --------------------

@pytest.mark.parametrize("n,batch,ranks", [(129, 32, 2), (10, 4, 3), (7, 7, 4), (65, 16, 4)])
def test_shards_cover_every_batch_without_empty_ones(n, batch, ranks):
    from concord.tensorflow.transparent.arrays import numpy_dataset as _numpy_dataset
    from concord.tensorflow.transparent.arrays import slice_batches as _slice_batches
    x = np.arange(n, dtype=np.int64)
    ds = _numpy_dataset([x, x * 10], x, None, batch, None)
    per_rank = []
    for r in range(ranks):
        sharded = _slice_batches(ds, r, ranks)
        assert int(sharded.cardinality()) == -(-n // batch)  # known, the same everywhere
        batches = [((a.tolist(), b.tolist()), c.tolist())
                   for (a, b), c in sharded.as_numpy_iterator()]
        assert all(len(c) > 0 for _, c in batches)
        assert all(a == c and b == [10 * i for i in c] for (a, b), c in batches)
        per_rank.append([i for _, c in batches for i in c])
    assert per_rank == [list(s) for s in shares(n, batch, ranks)]
    assert sorted(set().union(*per_rank)) == list(range(n))


def test_validation_split_is_keras_own():
    from keras.src.trainers.data_adapters.array_slicing import train_validation_split

    from concord.transparent.arrays import split_arrays as _split_arrays
    x, y = np.arange(71.0).reshape(71, 1), [np.arange(71.0), np.arange(71.0) * 2]
    for split in (0.3, 0.25, 0.5):
        mine = _split_arrays((x, y, None), split)
        theirs = train_validation_split((x, y, None), validation_split=split)
        for m, t in zip(mine, theirs):
            np.testing.assert_array_equal(m[0], t[0])
            for a, b in zip(m[1], t[1]):
                np.testing.assert_array_equal(a, b)
            assert m[2] is None and t[2] is None


# What concord.transparent.metrics sums over ranks: each metric class Keras has,
# updated with two parts of a batch by two instances and with both by a third,
# holds in the third the sum of the other two's state.
ARGS = {"IoU": dict(num_classes=2, target_class_ids=[0, 1]), "MeanIoU": dict(num_classes=2),
        "OneHotIoU": dict(num_classes=2, target_class_ids=[0, 1]),
        "OneHotMeanIoU": dict(num_classes=2), "PrecisionAtRecall": dict(recall=0.5),
        "RecallAtPrecision": dict(precision=0.5),
        "SensitivityAtSpecificity": dict(specificity=0.5),
        "SpecificityAtSensitivity": dict(sensitivity=0.5), "TopKCategoricalAccuracy": dict(k=1),
        "SparseTopKCategoricalAccuracy": dict(k=1),
        "MeanMetricWrapper": dict(fn=lambda t, p: abs(t - p))}


def update(metric, name, part):
    rng = np.random.default_rng(0)
    y = np.eye(2, dtype=np.float32)[rng.integers(0, 2, 16)][part]
    p = rng.uniform(0.05, 0.95, (16, 1)).astype(np.float32)
    p = np.concatenate([p, 1 - p], 1)[part]
    w = rng.uniform(0.5, 2, 16).astype(np.float32)[part]
    if "IoU" in name:  # its confusion matrix counts whole samples
        w = np.round(w).astype(np.int32)
    if name in ("Mean", "Sum"):
        metric.update_state(p[:, 0], sample_weight=w)
    elif name == "BinaryIoU":
        metric.update_state(y[:, 0], p[:, 0], sample_weight=w)
    elif name in ("IoU", "MeanIoU"):
        metric.update_state(y.argmax(1), p.argmax(1), sample_weight=w)
    else:
        metric.update_state(y.argmax(1) if name.startswith("Sparse") else y, p, sample_weight=w)


def test_the_metrics_whose_state_is_summed_hold_sums():
    import inspect

    import keras

    from concord.transparent.metrics import summed_state

    class Custom(keras.metrics.Mean):
        pass

    assert not summed_state(Custom())  # a script's may hold anything
    classes = [n for n in dir(keras.metrics) if inspect.isclass(getattr(keras.metrics, n))
               and issubclass(getattr(keras.metrics, n), keras.metrics.Metric)]
    checked = 0
    for name in classes:
        if name == "Metric":
            continue
        first, second, whole = [getattr(keras.metrics, name)(**ARGS.get(name, {}))
                                for _ in range(3)]
        if not summed_state(whole):
            continue  # averaged over ranks, whatever its state
        checked += 1
        update(first, name, slice(0, 6))
        update(second, name, slice(6, 16))
        update(whole, name, slice(0, 6))
        update(whole, name, slice(6, 16))
        assert whole.variables, name
        for a, b, c in zip(first.variables, second.variables, whole.variables):
            np.testing.assert_allclose(np.asarray(c), np.asarray(a) + np.asarray(b), rtol=1e-5,
                                       atol=1e-6, err_msg=name)
    assert checked >= 45  # every one of Keras 3.15's
