"""The DDP tutorial's multi-process program (``tests/support/ddp_tutorial_multigpu.py``: pytorch/examples
``ddp-tutorial-series/multigpu.py`` with ``multigpu_torchrun.py``'s snapshots, ported to zgrad) runs
as a user runs it (``mp.spawn``, two ranks), saves a snapshot with ``zgrad.save``, stops, and a
second run resumes from it; the snapshots hold what single-process training on both ranks'
batches gives."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
from rpc_harness import free_port
import pytest

import zgrad
import zgrad.nn.functional as F
from paths import REPO, SUPPORT

HERE = SUPPORT  # the ported tutorial program is a helper
SCRIPT = HERE / "ddp_tutorial_multigpu.py"
RUN_TIMEOUT_S = 240

pytestmark = pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)


def run_tutorial(cwd: Path, *args: str) -> str:
    """Run the program to its end; on a timeout kill its whole session (the spawned ranks too) and fail."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("ZGRAD_")}
    env.update(MASTER_PORT=str(free_port()), PYTHONPATH=str(REPO), NUMBA_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"the tutorial ran past {RUN_TIMEOUT_S} s:\n{output[-4000:]}")
    assert proc.returncode == 0, f"the tutorial exited with {proc.returncode}:\n{output[-4000:]}"
    return output


def reference_weights(epochs: list[int], batch_size: int) -> dict[str, np.ndarray]:
    """The model after SGD on the two ranks' batches joined, over ``epochs`` in that order (DDP
    averages the ranks' gradients: with equal batches, the gradient of the joined batch)."""
    sys.path.insert(0, str(HERE))
    try:
        import ddp_tutorial_multigpu as tutorial
    finally:
        sys.path.remove(str(HERE))
    dataset, model, optimizer = tutorial.load_train_objs()
    shards = [tutorial.DataLoader(dataset, batch_size, sampler=tutorial.DistributedSampler(dataset, 2, rank))
              for rank in range(2)]
    for epoch in epochs:
        for shard in shards:
            shard.sampler.set_epoch(epoch)
        for (x0, y0), (x1, y1) in zip(*shards):
            optimizer.zero_grad()
            F.cross_entropy(model(zgrad.cat([x0, x1])), zgrad.cat([y0, y1])).backward()
            optimizer.step()
    return {name: value.numpy() for name, value in model.state_dict().items()}


def assert_weights(snapshot: dict, want: dict[str, np.ndarray]) -> None:
    assert sorted(snapshot["MODEL_STATE"]) == sorted(want)
    for name, value in want.items():
        np.testing.assert_allclose(snapshot["MODEL_STATE"][name].numpy(), value, rtol=1e-6, atol=1e-7)


def test_the_tutorial_saves_a_snapshot_stops_and_resumes_from_it(tmp_path):
    first = run_tutorial(tmp_path, "2", "1", "--batch_size", "32")
    assert "Loading snapshot" not in first
    assert "Epoch 0 | Training snapshot saved at snapshot.pt" in first and "Epoch 1 | Training snapshot saved" in first
    snapshot = zgrad.load(tmp_path / "snapshot.pt")
    assert snapshot["EPOCHS_RUN"] == 1
    assert_weights(snapshot, reference_weights([0, 1], 32))

    second = run_tutorial(tmp_path, "4", "1", "--batch_size", "32")
    assert second.count("Loading snapshot") == 2 and second.count("Resuming training from snapshot at Epoch 1") == 2
    # both ranks print to one pipe, and an unbuffered print is two writes: lines may interleave
    run_epochs = sorted({int(epoch) for epoch in re.findall(r"\[GPU0\] Epoch (\d+) \|", second)})
    assert run_epochs == [1, 2, 3]  # the tutorial resumes at the epoch it saved, and runs it again
    snapshot = zgrad.load(tmp_path / "snapshot.pt")
    assert snapshot["EPOCHS_RUN"] == 3
    assert_weights(snapshot, reference_weights([0, 1, 1, 2, 3], 32))
    assert not list(tmp_path.glob(".*.tmp")), "zgrad.save left a temporary file"
