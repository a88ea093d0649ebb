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
    assert table["thresholds"]["hierarchical_piece_bytes"] in cm.PIECE_CHOICES


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


def test_pieces_hide_the_shorter_of_the_node_and_the_network():
    # Four pieces; the node's phases (4 + 4 time units) split evenly among them.
    assert cm.pipeline(4, 4, [4]) == 12  # one step: reduce-scatter, network, allgather
    # The node's phases dominate: all of them; the last piece's network step runs
    # beside the allgather of the piece before it.
    assert cm.pipeline(4, 4, [1] * 4) == pytest.approx(8)
    # The network dominates: all of it, plus the first scatter and the last gather.
    assert cm.pipeline(4, 4, [3] * 4) == pytest.approx(1 + 12 + 1)


def test_hierarchical_in_pieces():
    link = PARAMS["net"]["1gbit"]
    n = 1 << 26
    one_step = cm.hierarchical_time(2, 4, n, PARAMS, link, piece_bytes=0)
    scatter, gather = cm.node_phases(4, n, PARAMS)
    shared = dict(link, beta=4 * link["beta"])
    network = min(cm.flat_time(a, 2, 1, n / 4, PARAMS, shared) for a in cm.FLAT)
    assert one_step == pytest.approx(scatter + network + gather)
    # 16 pieces of 1 MiB per shard: the node's phases mostly behind the network.
    pieces = cm.hierarchical_time(2, 4, n, PARAMS, link, piece_bytes=1 << 20)
    assert max(network, scatter + gather) < pieces < one_step
    # One leader per host: one flow carries the whole message, in pieces of the message.
    leader = min(cm.flat_time(a, 2, 1, n, PARAMS, link) for a in cm.FLAT)
    assert cm.hierarchical_time(2, 4, n, PARAMS, link, piece_bytes=0, owners=1) == \
        pytest.approx(scatter + leader + gather)
    assert cm.hierarchical_time(2, 4, 1 << 22, PARAMS, link, piece_bytes=1 << 20, owners=1) < \
        cm.hierarchical_time(2, 4, 1 << 22, PARAMS, link, piece_bytes=0, owners=1)
    # A shard of one piece is sent in one step, as concord does.
    assert cm.hierarchical_time(2, 4, 1 << 20, PARAMS, link, piece_bytes=1 << 20) == \
        pytest.approx(cm.hierarchical_time(2, 4, 1 << 20, PARAMS, link, piece_bytes=0))


def test_a_fold_across_hosts_costs_the_link():
    link = PARAMS["net"]["1gbit"]
    n = 1 << 20
    # One host with one rank folds into another. Recursive doubling: its whole message
    # crosses, and back. Reduce-scatter + allgather: the pair swaps halves, each way.
    for algorithm, fold in (("recursive_doubling", n), ("reduce_scatter_allgather", n / 2)):
        three = cm.flat_time(algorithm, 3, 1, n, PARAMS, link)
        two = cm.flat_time(algorithm, 2, 1, n, PARAMS, link)
        assert three == pytest.approx(two + 2 * (link["alpha"] + fold * link["beta"]) +
                                      fold * PARAMS["gamma"])


def test_piece_size_follows_the_cost_of_a_piece():
    fast_node = dict(PARAMS, shm={"alpha": 1e-6, "beta": 1 / 600e9}, gamma=1 / 600e9)  # no cost
    slow_node = dict(PARAMS, shm={"alpha": 1e-6, "beta": 1 / 0.6e9})
    link = {"alpha": 10e-6, "beta": 1 / 1.2e9}
    chosen = cm.piece_bytes(slow_node, link, 16, 8)
    assert chosen in cm.PIECE_CHOICES and chosen != 0
    assert cm.piece_bytes(fast_node, link, 16, 8) in (0, cm.PIECE_CHOICES[-1])
    # A link whose every message costs a second: one step.
    assert cm.piece_bytes(slow_node, {"alpha": 1.0, "beta": 1 / 1.2e9}, 16, 8) == 0
