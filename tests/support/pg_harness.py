"""Run a function on N ranks of a process group (threads of this process) over a chosen
transport, and start a rank in a process of its own for the tests that kill it.

Each rank thread calls ``init_process_group``, runs ``body(rank)``, then
``destroy_process_group()``. Results and exceptions come back per rank; every wait is bounded.
Threads are fine for tcp and ipc too: each rank has its own mesh, sockets and ZeroMQ context,
so the traffic is real (big buffers take the same-host single copy, as between processes).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

import zgrad.distributed as dist
from rpc_harness import child_worker, free_port, join_threads

TRANSPORTS = ("tcp", "ipc", "inproc")
HERE = Path(__file__).resolve().parent
_jobs = itertools.count()
# Socket files of ipc groups go here, not loose in /tmp: a rank that a test kills cannot unlink its own.
_IPC_DIR = tempfile.mkdtemp(prefix="zgpg")
atexit.register(shutil.rmtree, _IPC_DIR, ignore_errors=True)


def pg_config(kind: str, **ddp: Any) -> dict:
    """A config for a process group over ``kind``, with its own job name (ipc and inproc
    endpoints follow from it) and short heartbeats; ``ddp`` adds ``[ddp]`` keys."""
    # heartbeat_timeout_s as the product's default: worker threads of a loaded test process can
    # go quiet for seconds; the tests of liveness set their own.
    transport = {"kind": kind, "connect_timeout_s": 20.0, "heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 10.0}
    if kind == "ipc":
        transport["ipc_dir"] = _IPC_DIR
    return {"job": {"name": f"pgt{os.getpid()}-{next(_jobs)}"}, "transport": transport, "ddp": dict(ddp)}


def run_ranks(world_size: int, body: Callable[[int], Any], kind: str = "tcp", config: dict | None = None,
              timeout_s: float = 90.0, ranks: Sequence[int] | None = None, port: int | None = None,
              destroy: bool = True) -> list[Any]:
    """Run ``body(rank)`` on every rank (or only on ``ranks``, the others running elsewhere);
    return the results by rank, raising the first error (with every rank's traceback noted)."""
    config = config if config is not None else pg_config(kind)
    port = port or free_port()
    results: list[Any] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size
    ranks = range(world_size) if ranks is None else ranks

    def rank_thread(rank: int) -> None:
        try:
            dist.init_process_group("zmq", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                    config=config)
            try:
                results[rank] = body(rank)
            finally:
                if destroy:
                    dist.destroy_process_group()
        except BaseException as exc:  # noqa: BLE001 - reported below
            exc.add_note(f"on rank {rank}:\n{traceback.format_exc()}")
            errors[rank] = exc

    join_threads([threading.Thread(target=rank_thread, args=(r,), name=f"test-rank{r}") for r in ranks], timeout_s)
    for error in errors:
        if error is not None:
            raise error
    return results


def run_ranks_expecting_errors(world_size: int, body: Callable[[int], Any], kind: str = "tcp",
                               config: dict | None = None, timeout_s: float = 60.0) -> list[Any]:
    """Like :func:`run_ranks`, but return each rank's result or exception instead of raising."""
    outcome: list[Any] = [None] * world_size

    def guarded(rank: int) -> None:
        try:
            outcome[rank] = body(rank)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            outcome[rank] = exc

    run_ranks(world_size, guarded, kind, config, timeout_s)
    return outcome


def leftover_threads() -> list[str]:
    """Threads of process groups (or meshes) still alive."""
    return [t.name for t in threading.enumerate() if t.name.startswith(("zgrad-pg-", "zgrad-mesh-io"))]


def rank_process(config: dict, rank: int, world_size: int, port: int) -> contextlib.AbstractContextManager[subprocess.Popen]:
    """Rank ``rank`` in a process of its own (``tests/support/pg_peer.py``), for the tests that kill it;
    see :func:`rpc_harness.child_worker`."""
    return child_worker("pg_peer.py", [json.dumps(config), str(rank), str(world_size), str(port)], f"rank {rank}")
