"""A Horovod PyTorch script with its import changed runs under concordrun
(hvd_torch_script.py): every rank ends with the same weights and the loss
falls. One process runs this file; it starts the 2-rank job itself."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if int(os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", 1))) > 1:
    pytest.skip("starts its own job: run it in one process", allow_module_level=True)


# What `import concord.torch` set in this process (a test before this one may
# have imported it): the job's ranks must choose their own, or rank 0's store
# would try to listen on the port this process's store holds.
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                      "MASTER_PORT")


def clean_env(keras_backend):
    # This test may itself run under mpiexec: the job must not join it.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "MPIR_", "MPICH_", "OMPI_"))
           and k not in TORCHRUN_VARIABLES}
    env["KERAS_BACKEND"] = keras_backend
    return env


# Plain concordrun starts a Python script in its transparent mode for Keras's
# backend (TensorFlow's where it is installed, or torch's): the import of
# concord.horovod.torch undoes it, said once.
@pytest.mark.parametrize("keras_backend", ["tensorflow", "torch"])
def test_horovod_script_under_concordrun(tmp_path, keras_backend):
    if keras_backend == "tensorflow":
        pytest.importorskip("tensorflow")
    out = tmp_path / "result.json"
    cmd = [sys.executable, "-m", "concord.launcher", "-np", "2", sys.executable,
           os.path.join(HERE, "hvd_torch_script.py"), str(out)]
    p = subprocess.run(cmd, env=clean_env(keras_backend), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    said = "the script uses import concord.horovod.torch: running it without the transparent"
    assert p.stderr.count(said) == 1, p.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["size"] == 2
    first, second = result["weights"]
    assert first == second  # the broadcast and the exchange kept the ranks identical
    losses = result["losses"]
    assert losses[-1] < 0.5 * losses[0], losses
