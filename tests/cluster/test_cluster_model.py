"""bench/cluster_model.py: its cost formulas, that a fit recovers known parameters
from records made with them, and that `tune` writes a table concord can load."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "bench", "cluster_model.py")
sys.path.insert(0, os.path.dirname(TOOL))
import cluster_model as cm  # noqa: E402

PARAMS = {"mpi": {"alpha": 2e-6, "beta": 1 / 3e9}, "shm": {"alpha": 1e-6, "beta": 1 / 6e9},
          "gamma": 1 / 2e9, "net": {"1gbit": {"alpha": 40e-6, "beta": 8 / 1e9}}}


def test_two_rank_ring_is_the_textbook_cost():
    n = 1 << 20  # blocks of 512 KiB: two 256 KiB segments, one message each
    t = cm.flat_time("ring", 1, 2, n, PARAMS, {"alpha": 0, "beta": 0})
    assert t == pytest.approx(2 * 2 * PARAMS["mpi"]["alpha"] + n * PARAMS["mpi"]["beta"]
                              + n / 2 * PARAMS["gamma"])
    small = 1 << 10  # one segment per block
    assert cm.flat_time("ring", 1, 2, small, PARAMS, {"alpha": 0, "beta": 0}) == pytest.approx(
        2 * PARAMS["mpi"]["alpha"] + small * PARAMS["mpi"]["beta"] + small / 2 * PARAMS["gamma"])


def test_ranks_of_a_host_share_its_link():
    link = PARAMS["net"]["1gbit"]
    n = 1 << 24
    # Recursive doubling at 2x2: the step across hosts carries both ranks' messages.
    t = cm.flat_time("recursive_doubling", 2, 2, n, PARAMS, link)
    cross = link["alpha"] + 2 * n * link["beta"]
    inside = PARAMS["mpi"]["alpha"] + n * PARAMS["mpi"]["beta"]
    assert t == pytest.approx(cross + inside + 2 * n * PARAMS["gamma"])
    # Hierarchical sends the message across once per host: faster on a slow link.
    assert cm.predict("hierarchical", 2, 2, n, PARAMS, link) < min(
        cm.predict(a, 2, 2, n, PARAMS, link) for a in cm.FLAT)


def _records(hosts, r, link):
    out = []
    for algorithm in cm.ALGORITHMS:
        for n in [4, 1024, 65536, 1 << 20, 1 << 24]:
            t = cm.predict(algorithm, hosts, r, n, PARAMS, PARAMS["net"].get(link, {}))
            out.append({"impl": "concord", "algorithm": algorithm, "bytes": n,
                        "avg_us": t * 1e6})
    return out


def test_fit_recovers_the_parameters(tmp_path):
    for name, (h, r, link) in {"1x2_none": (1, 2, "none"), "4x1_1gbit": (4, 1, "1gbit")}.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(_records(h, r, link)))
    fitted = cm.fit(cm.load_runs(str(tmp_path)))
    for level in ("mpi", "shm"):
        for k in ("alpha", "beta"):
            assert fitted[level][k] == pytest.approx(PARAMS[level][k], rel=0.02), (level, k)
    assert fitted["gamma"] == pytest.approx(PARAMS["gamma"], rel=0.02)
    for k in ("alpha", "beta"):
        assert fitted["net"]["1gbit"][k] == pytest.approx(PARAMS["net"]["1gbit"][k], rel=0.02)


def test_tune_writes_a_loadable_table(tmp_path):
    model = tmp_path / "model.json"
    model.write_text(json.dumps(PARAMS))
    out = tmp_path / "tuning.json"
    subprocess.run([sys.executable, TOOL, "tune", "--model", str(model), "--link", "eth-25g",
                    "--hosts", "512", "--ranks-per-host", "8", "-o", str(out)],
                   check=True, capture_output=True)
    table = json.loads(out.read_text())
    assert table["rules"][-1]["max_ranks"] is None
    entries = table["rules"][-1]["algorithms"]
    assert entries[-1]["max_bytes"] is None
    assert all(e["algorithm"] in cm.FLAT for e in entries)
    # Latency-bound small messages at 512 hosts: never the 1022-step ring.
    assert entries[0]["algorithm"] != "ring"
    sizes = [e["max_bytes"] for e in entries[:-1]]
    assert sizes == sorted(sizes)
    # Whole-message steps only for short messages; the last entry covers the largest.
    assert all(e["max_bytes"] <= cm.RECURSIVE_DOUBLING_MAX_BYTES for e in entries[:-1]
               if e["algorithm"] == "recursive_doubling")
    assert entries[-1]["algorithm"] != "recursive_doubling"


def test_unknown_link_is_an_error(tmp_path):
    model = tmp_path / "model.json"
    model.write_text(json.dumps(PARAMS))
    p = subprocess.run([sys.executable, TOOL, "predict", "--model", str(model), "--link", "x"],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "link 'x'" in p.stderr


def test_one_leader_only_where_one_flow_fills_the_link():
    own = {"alpha": 30e-6, "beta": 1 / 1.2e9}  # one rank's flow through an unlimited link
    model = dict(PARAMS, net={"none": own, "1gbit": {"alpha": 40e-6, "beta": 1 / 0.12e9},
                              "10gbit": {"alpha": 40e-6, "beta": 1 / 1.1e9}})
    assert cm.spread_bytes(model, "1gbit") == cm.ONE_LEADER  # a tenth of one flow
    assert cm.spread_bytes(model, "10gbit") == 0  # about one flow: spread the shards
    assert cm.spread_bytes(model, "eth-25g") == 0  # typical links: not fitted here
    assert cm.spread_bytes(PARAMS, "1gbit") == 0  # no unlimited run to compare with
