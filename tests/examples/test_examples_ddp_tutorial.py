"""pytorch/examples ``distributed/ddp-tutorial-series`` ported by renaming ``torch`` to ``zgrad``
(``examples/ddp_tutorial/``), run to the end as a user runs them: ``single_gpu.py`` in one
process, ``multigpu.py`` on two ranks started with ``mp.spawn``, and ``multigpu.py`` in its GPU
form (upstream's lines for the device) on Numba's simulated GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rpc_harness import free_port
import pytest

import zgrad
from paths import REPO

pytestmark = pytest.mark.timeout(300)

TUTORIAL = REPO / "examples" / "ddp_tutorial"


def run(cwd: Path, script: str | Path, *args: str, env: dict | None = None) -> str:
    """Run the tutorial's ``script`` (or the script at that path) to its end in ``cwd`` (where it
    writes its checkpoint), with ``env`` added to the environment."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    args = (str(TUTORIAL / script), *args)
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{args[0]} exited with {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def assert_checkpoint(path: Path, names: list[str]) -> None:
    state = zgrad.load(path)
    assert sorted(state) == sorted(names) and all(isinstance(v, zgrad.Tensor) for v in state.values())


def test_single_gpu(tmp_path):
    out = run(tmp_path, "single_gpu.py", "2", "1").splitlines()
    assert out == ["[GPUcpu] Epoch 0 | Batch size: 32 | Steps: 64", "Epoch 0 | Training checkpoint saved at checkpoint.pt",
                   "[GPUcpu] Epoch 1 | Batch size: 32 | Steps: 64", "Epoch 1 | Training checkpoint saved at checkpoint.pt"]
    assert_checkpoint(tmp_path / "checkpoint.pt", ["weight", "bias"])


def test_multigpu_with_mp_spawn(tmp_path):
    out = run(tmp_path, "multigpu.py", "2", "1", "--batch_size", "16", "--port", str(free_port()))
    # the ranks share stdout, and their buffered lines may interleave: count, do not split
    for rank in (0, 1):
        for epoch in (0, 1):  # each rank loads half of the 2048 samples: 64 batches of 16
            assert out.count(f"[GPU{rank}] Epoch {epoch} | Batch size: 16 | Steps: 64") == 1
    assert out.count("Training checkpoint saved") == 2  # by rank 0 only, every epoch
    assert all(out.count(f"Epoch {epoch} | Training checkpoint saved at checkpoint.pt") == 1 for epoch in (0, 1))
    assert_checkpoint(tmp_path / "checkpoint.pt", ["weight", "bias"])  # the module's, not DDP's


# upstream's device lines, which the port replaced with "cpu" (and a 64-sample dataset: the
# simulator runs each GPU thread as a Python thread)
_GPU_FORM = [
    ('    init_process_group(backend="gloo", rank=rank, world_size=world_size)',
     '    zgrad.cuda.set_device(rank)\n    init_process_group(backend="gloo", rank=rank, world_size=world_size)'),
    ('self.model = model.to("cpu")', "self.model = model.to(gpu_id)"),
    ("self.model = DDP(model)", "self.model = DDP(model, device_ids=[gpu_id])"),
    ('source = source.to("cpu")', "source = source.to(self.gpu_id)"),
    ('targets = targets.to("cpu")', "targets = targets.to(self.gpu_id)"),
    ("    world_size = args.world_size", "    world_size = zgrad.cuda.device_count()"),
    ("MyTrainDataset(2048)", "MyTrainDataset(64)"),
]


@pytest.mark.full
def test_multigpu_in_its_gpu_form_on_the_simulated_gpu(tmp_path):
    source = (TUTORIAL / "multigpu.py").read_text()
    for port, upstream in _GPU_FORM:
        assert source.count(port) == 1, port
        source = source.replace(port, upstream)
    (tmp_path / "multigpu_gpu.py").write_text(source)
    (tmp_path / "datautils.py").write_text((TUTORIAL / "datautils.py").read_text())
    out = run(tmp_path, tmp_path / "multigpu_gpu.py", "2", "1", "--port", str(free_port()),
              env={"NUMBA_ENABLE_CUDASIM": "1"})
    assert out.splitlines() == ["rank: 0, world_size: 1", "[GPU0] Epoch 0 | Batch size: 32 | Steps: 2",
                                "Epoch 0 | Training checkpoint saved at checkpoint.pt",
                                "[GPU0] Epoch 1 | Batch size: 32 | Steps: 2",
                                "Epoch 1 | Training checkpoint saved at checkpoint.pt"]
    state = zgrad.load(tmp_path / "checkpoint.pt", map_location="cpu")  # saved from the (simulated) GPU
    assert sorted(state) == ["bias", "weight"] and state["weight"].shape == (1, 20)
