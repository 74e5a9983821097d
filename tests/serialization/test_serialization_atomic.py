"""``zgrad.save`` to a path is atomic: a process killed with SIGKILL in the middle of a save leaves
the old checkpoint or the new one, never a torn file; permissions and symlinks are kept, and a
save that fails leaves nothing behind."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import zgrad
from paths import REPO

ROOT = REPO
ELEMENTS = 16 << 20  # 128 MiB of float64 per checkpoint: a save takes long enough to be caught in the middle
STARTUP_TIMEOUT_S = 120.0
MID_WRITE_TIMEOUT_S = 60.0

# The child saves checkpoint k (every weight equal to k, and {"version": k}) for k = 1, 2, ...
# over the same path, announcing each before it starts.
CHILD = """
import sys
import numpy as np
import zgrad
path, elements = sys.argv[1], int(sys.argv[2])
weights = np.empty(elements)
version = 0
while True:
    version += 1
    weights.fill(version)
    print(f"saving {version}", flush=True)
    zgrad.save({"version": version, "weights": zgrad.from_numpy(weights)}, path)
"""


def read_line(proc: subprocess.Popen, timeout_s: float) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    if not ready:
        pytest.fail(f"the saving child printed nothing within {timeout_s} s")
    return proc.stdout.readline().strip()


def wait_for_partial_temp_file(directory: Path, min_bytes: int, timeout_s: float) -> None:
    """Until a temporary file of a save in progress holds ``min_bytes`` (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for temp in directory.glob(".*.tmp"):
            try:
                if temp.stat().st_size >= min_bytes:
                    return
            except FileNotFoundError:  # renamed over the target meanwhile
                continue
        time.sleep(0.001)
    pytest.fail(f"no save in progress reached {min_bytes} bytes within {timeout_s} s")


def test_sigkill_during_save_leaves_the_old_checkpoint_or_the_new_one(tmp_path):
    path = tmp_path / "snapshot.pt"
    zgrad.save({"version": 0, "weights": zgrad.zeros(ELEMENTS, dtype=zgrad.float64)}, path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(ELEMENTS)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert read_line(proc, STARTUP_TIMEOUT_S) == "saving 1"
        wait_for_partial_temp_file(tmp_path, ELEMENTS * 8 // 4, MID_WRITE_TIMEOUT_S)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    snapshot = zgrad.load(path)
    version = snapshot["version"]
    weights = snapshot["weights"].numpy()
    assert weights.shape == (ELEMENTS,)
    assert np.all(weights == version), f"a torn checkpoint: version {version} with other weights"
    leftovers = list(tmp_path.glob(".*.tmp"))
    assert len(leftovers) <= 1, f"a killed save leaves at most its own temporary file, found {leftovers}"


def test_a_save_keeps_the_permissions_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "c.pt"
    zgrad.save({"a": 1}, path)
    os.chmod(path, 0o600)
    zgrad.save({"a": 2}, path)
    assert (path.stat().st_mode & 0o777) == 0o600 and zgrad.load(path) == {"a": 2}


def test_a_save_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path):
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "epoch3.pt"
    zgrad.save({"epoch": 2}, target)
    link = tmp_path / "latest.pt"
    link.symlink_to(target)
    zgrad.save({"epoch": 3}, link)
    assert link.is_symlink() and zgrad.load(target) == {"epoch": 3}


def test_a_save_leaves_no_temporary_file_and_a_failed_write_removes_its_own(tmp_path, monkeypatch):
    path = tmp_path / "c.pt"
    zgrad.save({"w": zgrad.ones(3)}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]

    def failing_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left on device"):
        zgrad.save({"w": zgrad.zeros(3)}, path)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]
    assert zgrad.load(path)["w"].tolist() == [1.0, 1.0, 1.0]
