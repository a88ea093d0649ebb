"""concordrun does not shard again what concord.data already sharded: fit() on
a reader's arrays (and on a dataset built on the reader) trains every rank on
its own share, and each epoch on every sample exactly once."""
import json
import os
import shutil

import numpy as np
import pytest

from test_keras_equivalence import run

pytest.importorskip("concord.tensorflow")
CASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data_case.py")
TOTAL = 22  # 11 samples a rank: a last global batch of 2, one sample a rank


def test_reader_data_is_not_sharded_again(tmp_path):
    i = np.arange(TOTAL)
    np.save(tmp_path / "x.npy", np.stack([i, i, i], 1).astype(np.float32))
    np.save(tmp_path / "y.npy", (i % 3).astype(np.float32))
    concordrun = shutil.which("concordrun")
    assert concordrun, "concordrun is not installed (pip install .)"
    run([concordrun, "-np", "2", "python", CASE, str(tmp_path)], timeout=300)
    ranks = [json.load(open(tmp_path / f"rank{r}.json")) for r in range(2)]
    for r, got in enumerate(ranks):
        assert got["indices"] == list(range(r, TOTAL, 2))  # the transparent mode's rule
    for fit in range(3):  # the reader's arrays, its dataset, x made a plain array
        epochs = [got["seen"][fit] for got in ranks]
        assert len(epochs[0]) == len(epochs[1]) == (2 if fit == 0 else 1)
        for e in range(len(epochs[0])):
            steps = [epochs[r][e] for r in range(2)]
            assert len(steps[0]) == len(steps[1]) == 6  # ceil(11 / 2) steps on each rank
            for r in range(2):
                flat = sum(steps[r], [])
                assert sorted(flat) == ranks[r]["indices"]  # its own share, all of it, once
        if fit == 0:  # shuffled: the epochs differ
            assert epochs[0][0] != epochs[0][1]
    # A y that is not the reader's share (here the whole data set's) is an error
    # on every rank, not labels paired with other samples.
    for got in ranks:
        assert "different numbers of samples on rank 0 (x 11, y 22)" in got["mismatch"]
