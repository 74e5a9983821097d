"""Start ``zgrad-run`` (``python -m zgrad.distributed.run``) or torchrun as a user does, read its
output line by line while it runs, find its workers, and never leave a process behind."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
from paths import REPO, SUPPORT

HERE = SUPPORT
WAIT_S = 120.0


def launcher_env(**extra: str) -> dict[str, str]:
    """The test's environment without zgrad's or torchrun's job variables, zgrad importable."""
    dropped = ("ZGRAD_", "PET_", "TORCHELASTIC_")
    job = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped) and k not in job}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]), NUMBA_NUM_THREADS="1")
    env.update(extra)
    return env


class Launch:
    """A running launcher: its merged output as lines, waitable; killed with its session on exit."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None,
                 module: str = "zgrad.distributed.run", argv: list[str] | None = None):
        """Start ``python -m module args...`` (or ``argv`` as given: srun, mpirun)."""
        self.argv = argv or [sys.executable, "-m", module, *args]
        self.proc = subprocess.Popen(self.argv, cwd=cwd, env=env or launcher_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _take(self, timeout_s: float) -> str | None:
        line = self._queue.get(timeout=timeout_s)
        if line is not None:
            self.lines.append(line)
        return line

    def wait_for(self, pattern: str, timeout_s: float = WAIT_S) -> re.Match:
        """Read until a line matches ``pattern``; fail with the output so far if it never does."""
        deadline = time.monotonic() + timeout_s
        for line in self.lines:
            if (found := re.search(pattern, line)) is not None:
                return found
        while True:
            try:
                line = self._take(max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no line matched {pattern!r} within {timeout_s:g} s:\n{self.output[-4000:]}")
            if line is None:
                pytest.fail(f"the launcher ended before a line matched {pattern!r}:\n{self.output[-4000:]}")
            if (found := re.search(pattern, line)) is not None:
                return found

    def finish(self, timeout_s: float = WAIT_S) -> int:
        """Wait for the launcher to exit and its output to end; return its exit status."""
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the launcher ran past {timeout_s:g} s:\n{self.output[-4000:]}")
        self._reader.join(10.0)
        while True:
            try:
                if self._take(0) is None:
                    break
            except queue.Empty:
                break
        return code

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10.0)

    def workers(self) -> dict[int, int]:
        """The launcher's live worker processes: local rank -> pid."""
        found = {}
        for pid in children(self.proc.pid):
            local_rank = environ_of(pid).get("LOCAL_RANK")
            if local_rank is not None:
                found[int(local_rank)] = pid
        return found


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def environ_of(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: list[int], timeout_s: float = 30.0) -> list[int]:
    """Wait until none of ``pids`` is alive; return those still alive at the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


@contextlib.contextmanager
def launches(*items: Launch) -> Iterator[tuple[Launch, ...]]:
    """Kill every launcher (and its session) that is still running when the block ends."""
    try:
        yield items
    finally:
        for item in items:
            if item.proc.poll() is None:
                item.kill()
