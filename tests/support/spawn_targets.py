"""Functions the ``zgrad.multiprocessing`` tests run in child processes (importable by name, as
``spawn`` requires)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def record(index, out_dir, tag):
    Path(out_dir, f"{index}").write_text(f"{tag}:{os.getpid()}:{os.getppid()}")


def fail_one(index, failing, out_dir):
    """Child ``failing`` raises; the others record their pid and sleep until stopped."""
    if index == failing:
        time.sleep(0.2)
        raise ValueError(f"child {index} failed on purpose")
    Path(out_dir, f"{index}").write_text(str(os.getpid()))
    time.sleep(60)


def kill_self(index, victim):
    if index == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)


def sleep_for(index, seconds, out_dir):
    Path(out_dir, f"{index}").write_text(str(os.getpid()))
    time.sleep(seconds)
