"""A worker that dies (kill -9) or stops (SIGSTOP), over tcp and ipc: calls fail within
heartbeat_timeout_s naming it, later calls fail at once, and a graceful shutdown finishes with an
error naming it."""

from __future__ import annotations

import signal
import time

import pytest

import rpc_targets as T
from rpc_harness import make_config, peer_process
from zgrad.distributed import rpc
from zgrad.errors import WorkerUnavailableError

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["kill-9", "sigstop"])
def test_dead_worker_fails_pending_and_later_calls_and_shutdown_names_it(kind, how, tmp_path):
    config = make_config(kind, 2, tmp_path)
    config["transport"].update(heartbeat_interval_s=0.1, heartbeat_timeout_s=1.0)
    with peer_process(config, 1, 2) as peer:
        rpc.init_rpc("worker0", rank=0, world_size=2, config=config)
        try:
            assert rpc.rpc_sync("worker1", T.add, args=(1, 2)) == 3
            pending = rpc.rpc_async("worker1", T.sleep_then, args=(30.0, "never"), timeout=0)
            time.sleep(0.2)
            peer.send_signal(how)
            start = time.monotonic()
            with pytest.raises(WorkerUnavailableError, match="worker1"):
                pending.wait()
            assert time.monotonic() - start < 1.0 + 2.0  # heartbeat_timeout_s plus slack
            start = time.monotonic()
            with pytest.raises(WorkerUnavailableError, match="worker1"):
                rpc.rpc_sync("worker1", T.add, args=(1, 2))
            assert time.monotonic() - start < 0.5
        finally:
            start = time.monotonic()
            with pytest.raises(WorkerUnavailableError, match="worker1"):
                rpc.shutdown(timeout=5.0)
            assert time.monotonic() - start < 5.0
