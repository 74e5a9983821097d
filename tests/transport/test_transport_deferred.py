"""Deferred cross-memory reads (``create_mesh(defer_cma_reads=True)``, the process group's mesh):
big buffers reach ``on_message`` unread, as handles the consumer reads on its own thread into
their destination or releases; the sender gets its memory back only then, and closing waits for
it."""

from __future__ import annotations

import gc
import os
import threading
import time

import numpy as np
import pytest

from zgrad.errors import TransportError
from zgrad.transport import RemoteRead

MIB = 1 << 20

pytestmark = pytest.mark.timeout(60)


def _tickets_open(worker) -> int:
    return worker.mesh.stats()["cma_tickets_open"]


def _settle(worker, timeout_s: float = 5.0) -> int:
    end = time.monotonic() + timeout_s
    while _tickets_open(worker) and time.monotonic() < end:
        time.sleep(0.01)
    return _tickets_open(worker)


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_big_buffers_arrive_unread_and_read_into_their_destination(worlds, kind):
    workers = worlds.world(kind, 2, defer_cma_reads=True)
    big = os.urandom(3 * MIB)
    workers[0].mesh.send(1, 1, 7, {"n": 1}, [big, b"small"])
    env = workers[1].get()
    handle, small = env.buffers
    assert isinstance(handle, RemoteRead) and handle.nbytes == len(big)
    assert small == b"small"  # small buffers come in frames, as always
    assert _tickets_open(workers[0]) == 1  # the sender holds the memory until it is read
    out = np.empty(len(big), np.uint8)
    handle.read_into(out)
    assert out.tobytes() == big
    assert _settle(workers[0]) == 0
    assert workers[1].mesh.stats()["cma_received"] == 1
    with pytest.raises(TransportError, match="already read or released"):
        handle.read_into(out)


def test_released_or_dropped_handles_give_the_memory_back(worlds):
    workers = worlds.world("tcp", 2, defer_cma_reads=True)
    for _ in range(2):
        workers[0].mesh.send(1, 1, 0, None, [os.urandom(MIB)])
    first, second = workers[1].get(), workers[1].get()
    assert _tickets_open(workers[0]) == 2
    first.buffers[0].release()
    first.buffers[0].release()  # idempotent
    del second
    gc.collect()
    assert _settle(workers[0]) == 0
    assert workers[1].mesh.stats().get("cma_received", 0) == 0


def test_read_errors(worlds):
    workers = worlds.world("tcp", 2, defer_cma_reads=True)
    workers[0].mesh.send(1, 1, 0, None, [os.urandom(MIB)])
    handle = workers[1].get().buffers[0]
    with pytest.raises(TransportError, match="cannot be read into 10 bytes"):
        handle.read_into(bytearray(10))
    assert handle.read() is not None  # still readable after a refused destination
    assert _settle(workers[0]) == 0


def test_a_read_from_another_thread_while_the_sender_closes(worlds):
    """The sender's close waits until the receiver has read what it was offered, so a read that
    comes a moment later still finds the memory (and the bytes) it was promised."""
    workers = worlds.world("tcp", 2, defer_cma_reads=True)
    big = os.urandom(2 * MIB)
    workers[0].mesh.send(1, 1, 0, None, [big])
    handle = workers[1].get().buffers[0]
    closer = threading.Thread(target=workers[0].mesh.close)
    closer.start()
    time.sleep(0.3)
    assert closer.is_alive()  # still waiting for the read
    assert bytes(handle.read()) == big
    closer.join(10)
    assert not closer.is_alive()
