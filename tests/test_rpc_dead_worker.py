"""A worker that dies (kill -9) or stops (SIGSTOP): calls fail within heartbeat_timeout_s naming
it, later calls fail at once, and a graceful shutdown finishes with an error naming it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rpc_targets as T
from rpc_harness import make_config
from zgrad.distributed import rpc
from zgrad.errors import WorkerUnavailableError

pytestmark = pytest.mark.timeout(60)
HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["kill-9", "sigstop"])
def test_dead_worker_fails_pending_and_later_calls_and_shutdown_names_it(how):
    config = make_config("tcp", 2)
    config["transport"].update(heartbeat_interval_s=0.1, heartbeat_timeout_s=1.0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    peer = subprocess.Popen([sys.executable, str(HERE / "rpc_peer.py"), json.dumps(config)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        rpc.init_rpc("worker0", rank=0, world_size=2, config=config)
        try:
            assert rpc.rpc_sync("worker1", T.add, args=(1, 2)) == 3
            pending = rpc.rpc_async("worker1", T.sleep_then, args=(30.0, "never"), timeout=0)
            time.sleep(0.2)
            os.kill(peer.pid, how)
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
    finally:
        if how == signal.SIGSTOP:
            os.kill(peer.pid, signal.SIGCONT)
        peer.kill()
        peer.wait(10)
