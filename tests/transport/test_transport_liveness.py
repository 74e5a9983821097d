"""Liveness across processes: a peer killed with SIGKILL or frozen with SIGSTOP is reported in time.

Heartbeats here: every 0.1 s, lost after 1 s of silence. The peers are child processes of this
test (``peer_process.py``), always killed in ``finally``.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import time
import uuid

import pytest

from zgrad.config import parse_config
from zgrad.errors import WorkerUnavailableError
from zgrad.transport import create_mesh
from paths import SUPPORT

PEER = SUPPORT / "peer_process.py"
HEARTBEAT_TIMEOUT_S = 1.0
# Detection may lag the timeout by one housekeeping turn (a heartbeat interval) plus scheduling.
SLACK_S = 1.0


def spawn_world(peers: int):
    """Rank 0 here, ranks 1..peers as child processes; returns (mesh, lost queue, inbox, children)."""
    job = f"live{uuid.uuid4().hex[:8]}"
    config = parse_config({"job": {"name": job}, "transport": {
        "kind": "tcp", "connect_timeout_s": 20.0, "heartbeat_interval_s": 0.1,
        "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S}})
    lost: queue.SimpleQueue = queue.SimpleQueue()
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    mesh = create_mesh(config, 0, peers + 1, "survivor", on_message=inbox.put,
                       on_peer_lost=lambda rank, why: lost.put((rank, why, time.monotonic())), valid_kinds={1})
    port = mesh.bind().rsplit(":", 1)[1]
    children = [subprocess.Popen([sys.executable, str(PEER), str(r), str(peers + 1), port, job],
                                 stdout=subprocess.PIPE, text=True) for r in range(1, peers + 1)]
    return mesh, lost, inbox, children


def reap(children) -> None:
    for child in children:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
        child.wait(10)
        child.stdout.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_a_dead_or_frozen_peer_is_reported_within_the_timeout(how):
    mesh, lost, inbox, children = spawn_world(2)
    try:
        mesh.start()
        for child in children:
            assert child.stdout.readline().strip() == "READY"
        for rank in (1, 2):
            mesh.send(rank, 1, rank, {"ping": rank}, [b"x" * 100])
        assert sorted(inbox.get(timeout=10).request_id for _ in range(2)) == [1, 2]

        victim = children[0]
        os.kill(victim.pid, getattr(signal, how))
        t0 = time.monotonic()
        rank, reason, at = lost.get(timeout=HEARTBEAT_TIMEOUT_S + 10)
        assert rank == 1 and "heartbeat_timeout_s" in reason
        assert at - t0 <= HEARTBEAT_TIMEOUT_S + SLACK_S, f"reported after {at - t0:.2f} s"

        t1 = time.monotonic()
        with pytest.raises(WorkerUnavailableError, match="peer1"):
            mesh.send(1, 1, 0)
        assert time.monotonic() - t1 < 0.1  # fails fast, no queueing
        assert not mesh.is_alive(1) and mesh.is_alive(2)
        mesh.send(2, 1, 7, "the other peer still answers")
        assert inbox.get(timeout=10).request_id == 7
        assert mesh.stats()["peers_lost"] == 1
    finally:
        mesh.close(timeout_s=1.0)
        reap(children)


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_a_worker_whose_process_was_frozen_past_the_timeout_loses_no_live_peer(worlds, kind):
    # A C extension that holds the GIL (LLVM compiling a Numba kernel on a loaded machine, say)
    # freezes every thread of its process, the mesh's I/O threads too. What the peers sent
    # meanwhile waits unread: the silence is this worker's own, not its peers'. (Both meshes
    # live in this process, so both are frozen; each used to declare the other lost on waking.)
    import ctypes

    workers = worlds.world(kind, 2, heartbeat_interval_s=0.1, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S)
    ctypes.PyDLL(None).sleep(3)  # PyDLL: the call keeps the GIL, three timeouts long
    time.sleep(2 * HEARTBEAT_TIMEOUT_S)  # the loops run again, past another timeout
    assert [w.mesh.is_alive(1 - r) for r, w in enumerate(workers)] == [True, True]
    assert workers[0].lost.empty() and workers[1].lost.empty()
    workers[0].mesh.send(1, 1, 7)
    assert workers[1].get().request_id == 7
