"""Functions the ``zgrad.multiprocessing`` tests run in child processes (importable by name, as
``spawn`` requires)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def record(index, out_dir, tag):
    Path(out_dir, f"{index}").write_text(f"{tag}:{os.getpid()}:{os.getppid()}")


def fail_one(index, failing, out_dir, siblings):
    """Child ``failing`` raises once its ``siblings`` have recorded their pids (so the parent has
    every one of them to stop, however slowly they started); the others record and sleep."""
    if index == failing:
        deadline = time.monotonic() + 60
        while len(list(Path(out_dir).glob("[0-9]"))) < siblings and time.monotonic() < deadline:
            time.sleep(0.01)
        raise ValueError(f"child {index} failed on purpose")
    Path(out_dir, f"{index}.tmp").write_text(str(os.getpid()))
    Path(out_dir, f"{index}.tmp").rename(Path(out_dir, f"{index}"))  # whole, or not there yet
    time.sleep(60)


def kill_self(index, victim):
    if index == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)


def sleep_for(index, seconds, out_dir):
    Path(out_dir, f"{index}").write_text(str(os.getpid()))
    time.sleep(seconds)


def train_shared(model, view, results, done):
    """A Hogwild worker: update the shared parameters and a shared view in place, send a tensor
    back, and stay alive until the parent has it (the queue hands over the memory's descriptor)."""
    import zgrad

    with zgrad.no_grad():
        for p in model.parameters():
            p.add_(1)
        view.mul_(3)
    results.put((type(model.weight).__name__, model.weight.requires_grad, zgrad.full((2,), 7.0)))
    done.wait(60)


def add_one_to_each(tensors, done):
    """Add 1 in place to each tensor sent (views of one block among them)."""
    for t in tensors:
        t.add_(1)
    done.set()


def send_back(inbox, outbox, done):
    """Send the received tensor on, unchanged (its view must reach the same elements)."""
    outbox.put(inbox.get(timeout=60))
    done.wait(60)
