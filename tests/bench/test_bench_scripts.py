"""The benchmarks' Python tools on crafted records, against values worked out by hand
(pytest; CTest runs it as bench_scripts)."""
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEDIAN_TABLE = os.path.join(ROOT, "bench", "median_table")


def record(impl, algorithm, size, us, **fields):
    """An allreduce record as concord-bench --json writes it."""
    r = {"impl": impl, "algorithm": algorithm, "dtype": "float32", "op": "sum", "ranks": 2,
         "bytes": size, "count": size // 4, "avg_us": us, "min_us": us, "max_us": us,
         "iterations": 10, "warmup": 1, "busbw_gbps": size / us / 1e3, "validated": True,
         "device": "cpu", "buffers": "thp", "host": "vm", "mpi_library": "MPICH Version: 4.0.2",
         "concord_version": "0.1.0", "commit": "abc1234"}
    r.update(fields)
    return r


def write_runs(tmp_path, runs):
    paths = []
    for i, records in enumerate(runs):
        path = tmp_path / f"run{i + 1}.json"
        path.write_text(json.dumps(records))
        paths.append(str(path))
    return paths


def median_table(paths, *extra):
    return subprocess.run([sys.executable, MEDIAN_TABLE, *paths, *extra], capture_output=True,
                          text=True, timeout=60)


def table_row(out, size):
    """The cells of the table's row for `size` bytes."""
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == str(size):
            return cells
    raise AssertionError(f"no row for {size} in:\n{out}")


def test_median_table_even_runs_take_the_mean_of_the_middle_two(tmp_path):
    # concord 1 µs every run; mpi 2, 3, 5, 9 µs: ratios 2, 3, 5, 9, median (3 + 5) / 2.
    runs = [[record("concord", "auto", 4, 1.0), record("mpi", "mpi", 4, us)]
            for us in (9.0, 2.0, 5.0, 3.0)]
    p = median_table(write_runs(tmp_path, runs))
    assert p.returncode == 0, p.stderr
    assert table_row(p.stdout, 4)[2] == "4.00"  # mpi µs
    assert table_row(p.stdout, 4)[-1] == "4.00"  # mpi / concord:auto


@pytest.mark.parametrize("field,other", [("commit", "def5678"), ("host", "other-vm"),
                                         ("ranks", 4), ("buffers", "ordinary"),
                                         ("mps", "on")])
def test_median_table_refuses_runs_measured_differently(tmp_path, field, other):
    same = [[record("concord", "auto", 4, 1.0), record("mpi", "mpi", 4, 3.0)] for _ in range(2)]
    odd = [record("concord", "auto", 4, 10.0, **{field: other}),
           record("mpi", "mpi", 4, 5.0, **{field: other})]
    p = median_table(write_runs(tmp_path, same + [odd]))
    assert p.returncode != 0, p.stdout
    assert f"different {field}" in p.stderr and "run3.json" in p.stderr


def test_median_table_says_when_a_cell_has_fewer_runs(tmp_path):
    # Three runs; mpi only in the first: its time and ratio are one run's, not three's.
    runs = [[record("concord", "auto", 4, 1.0), record("mpi", "mpi", 4, 3.0)],
            [record("concord", "auto", 4, 2.0)], [record("concord", "auto", 4, 4.0)]]
    p = median_table(write_runs(tmp_path, runs))
    assert p.returncode == 0, p.stderr
    cells = table_row(p.stdout, 4)
    assert cells[1] == "2.00"  # concord µs: median of 1, 2, 4 over all three runs
    assert cells[2] == "3.00 (1 of 3 runs)"
    assert cells[-1] == "3.00 (1 of 3 runs)"


def test_median_table_refuses_a_run_whose_check_failed(tmp_path):
    runs = [[record("concord", "auto", 4, 1.0), record("mpi", "mpi", 4, 2.0)] for _ in range(3)]
    runs[1][1]["validated"] = False
    p = median_table(write_runs(tmp_path, runs))
    assert p.returncode != 0
    assert "run2.json: mpi at 4 bytes failed its check (validated false)" in p.stderr
    runs[1][1]["validated"] = None  # no -c: nothing known to be wrong, taken
    assert median_table(write_runs(tmp_path, runs)).returncode == 0


def test_median_table_refuses_a_run_with_two_records_of_one_size(tmp_path):
    runs = [[record("concord", "auto", 4, 1.0), record("concord", "auto", 4, 2.0)]]
    p = median_table(write_runs(tmp_path, runs))
    assert p.returncode != 0 and "two records of concord:auto at 4 bytes" in p.stderr


TORCH_ALLREDUCE = os.path.join(ROOT, "bench", "torch_allreduce.py")


@pytest.mark.parametrize("spec,sizes", [("4:64M", [4 << 2 * k for k in range(13)]),
                                        ("16", [16]), ("8K:512K", [8192, 32768, 131072, 524288])])
def test_torch_allreduce_sizes_are_min_times_powers_of_4_up_to_max(spec, sizes):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import torch_allreduce
    finally:
        sys.path.pop(0)
    assert torch_allreduce.size_range(spec) == sizes


@pytest.mark.parametrize("spec,why", [
    ("6:6", "MIN 6 bytes is not a whole number of 4-byte"),  # one float32 reduced, 6 recorded
    ("4:32M", "never reach MAX 33554432.*-m 4:16777216 or -m 4:67108864"),  # 32M left out
    ("8K:1M", "never reach MAX 1048576"),
])
def test_torch_allreduce_refuses_sizes_it_would_not_measure(spec, why):
    # Refused while parsing the command line, before torch or MPI is started.
    p = subprocess.run([sys.executable, TORCH_ALLREDUCE, "-m", spec], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert re.search(why, p.stderr), p.stderr


def test_train_throughput_record_names_commit_and_machine(tmp_path):
    concord = pytest.importorskip("concord")
    # One process of a stand-in example that prints its throughput as the examples do.
    example = tmp_path / "example.py"
    example.write_text('print("samples/s 1234")\n')
    out = tmp_path / "train.json"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "train_throughput"),
                        "--ranks", "1", "--repeats", "2", "--example", str(example),
                        "--json", str(out)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rec = json.loads(out.read_text())
    assert rec["commit"] == concord.build_commit()  # the package measured
    here = subprocess.run(["git", "describe", "--tags", "--always", "--dirty"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip() or "unknown"
    assert rec.get("bench_commit", rec["commit"]) == here
    assert rec["machine"] == f"{platform.node()} {os.cpu_count()} CPUs"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", rec["date"])
    assert rec["ranks"] == [1] and rec["results"]["concord_1"]["runs"] == [1234.0, 1234.0]


def commit_of(described):
    """The commit `git describe --tags --always [--dirty]` names: TAG-N-gHASH or HASH."""
    text = described.removesuffix("-dirty")
    m = re.fullmatch(r".*-\d+-g([0-9a-f]{7,40})", text)
    return m.group(1) if m else text


def test_the_installed_package_names_a_commit_of_this_repository():
    concord = pytest.importorskip("concord")
    built = concord.build_commit()
    if shutil.which("git") is None or subprocess.run(
            ["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    assert built != "unknown", "built in a git checkout, so its commit is known"
    p = subprocess.run(["git", "cat-file", "-e", commit_of(built) + "^{commit}"], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 0, f"{built}: not a commit of {ROOT}: {p.stderr}"


def records_module():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import records
    finally:
        sys.path.pop(0)
    return records


def test_a_record_names_the_package_s_commit_and_the_scripts_where_they_differ(
        monkeypatch, capsys):
    concord = pytest.importorskip("concord")
    records = records_module()
    monkeypatch.setattr(concord, "build_commit", lambda: "1111111")
    monkeypatch.setattr(records, "checkout_commit", lambda: "1111111")
    assert records.provenance() == {"commit": "1111111"}
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(records, "checkout_commit", lambda: "2222222-dirty")
    assert records.provenance() == {"commit": "1111111", "bench_commit": "2222222-dirty"}
    assert "built from 1111111, these benchmarks are at 2222222-dirty" in capsys.readouterr().err


def test_torch_allreduce_ratios_are_the_median_of_each_round_s(tmp_path, capsys):
    # Round by round gloo took 2x, 4x, 3x concord's time while the machine's
    # speed changed: the median of those is 3, the ratio of the medians 4.
    pytest.importorskip("concord")
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    try:
        import torch_allreduce
    finally:
        sys.path.pop(0)
    batches = {"concord": {4: [1.0, 1.0, 3.0]}, "gloo": {4: [2.0, 4.0, 9.0]}}
    out = tmp_path / "r.json"
    args = types.SimpleNamespace(sizes=[4], json=str(out), rounds=3, device="cpu", tag=[])
    torch_allreduce.report(args, ["concord", "gloo"], batches, 2, {})
    row = json.loads(out.read_text())["rows"][0]
    assert row["gloo_over_concord"] == 3.0
    assert (row["concord_s"], row["gloo_s"]) == (1.0, 4.0)  # the medians, as before
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "3.00"


def test_a_copy_without_git_names_the_commit_device_prepare_packed(tmp_path):
    # The GPU node's copy of the tree has no .git; scripts/device-check sets
    # CONCORD_SOURCE_COMMIT from what scripts/device-prepare wrote.
    shutil.copy(os.path.join(ROOT, "bench", "records.py"), tmp_path)
    code = "import records; print(records.checkout_commit())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path.parent)  # no repository above it either

    def described(**extra):
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60, env=dict(env, **extra)).stdout.strip()

    assert described() == "unknown"
    assert described(CONCORD_SOURCE_COMMIT="abc1234 (device-prepare's)") == \
        "abc1234 (device-prepare's)"


def test_torch_allreduce_refuses_a_tag_given_twice():
    p = subprocess.run([sys.executable, TORCH_ALLREDUCE, "--tag", "mps=on", "--tag", "mps=off"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--tag mps: given twice" in p.stderr, (p.stdout, p.stderr)


# Runs one rank of bench/torch_ddp.py's worker with rank 1's clock running 1000 s ahead
# over the timed steps, as if rank 1 were that much slower.
SLOW_RANK_DRIVER = """
import os, sys, time, types
sys.path.insert(0, sys.argv[1])
import torch_ddp
if os.environ.get("PMI_RANK") == "1":
    calls = []
    def perf_counter():
        calls.append(None)
        return time.perf_counter() + 1000.0 * (len(calls) - 1)
    torch_ddp.time = types.SimpleNamespace(perf_counter=perf_counter)
sys.argv = ["torch_ddp.py", "--worker", sys.argv[2], "--model", "mlp", "--batch", "4",
            "--steps", "2", "--warmup", "0", "--ranks", "2"]
torch_ddp.main()
"""


@pytest.mark.parametrize("config", ["ceiling", "concord"])
def test_torch_ddp_times_every_configuration_by_its_slowest_rank(tmp_path, config):
    pytest.importorskip("torch")
    pytest.importorskip("concord._torch", reason="concord's PyTorch backend is not installed")
    mpiexec = shutil.which("mpiexec.mpich")
    if mpiexec is None:
        pytest.skip("no mpiexec.mpich")
    driver = tmp_path / "slow_rank.py"
    driver.write_text(SLOW_RANK_DRIVER)
    p = subprocess.run([mpiexec, "-n", "2", sys.executable, str(driver),
                        os.path.join(ROOT, "bench"), config], capture_output=True, text=True,
                       timeout=100)
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
    assert result["config"] == config and result["ranks"] == 2
    assert result["elapsed_s"] >= 1000.0, result  # rank 1's time, not rank 0's
