"""Run a function on N RPC workers (threads of this process) over a chosen transport, and start
a worker in a process of its own for the tests that kill it (:func:`peer_process`).

Each worker thread calls ``init_rpc``, runs ``body(rank)``, then ``shutdown()``. Results and
exceptions come back per rank; every wait is bounded. Threads are fine for tcp and ipc too:
each agent has its own sockets and ZeroMQ context, so the traffic is real.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from zgrad.distributed import rpc
from zgrad.errors import ZgradTimeoutError

TRANSPORTS = ("tcp", "ipc", "inproc")
HERE = Path(__file__).resolve().parent


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_LOWEST_PORT = 10000
_next_port: list[int] = []


def free_port(pair: bool = False) -> int:
    """A loopback TCP port that is free now (with ``pair``, the next one is free too).

    Not a port from bind(port 0): those come from the kernel's ephemeral range, where any
    outbound connection (ZeroMQ connects all the time, in every test process) may take it
    between this call and the bind that uses it, which CI met ("Address already in use"). These
    ports lie below that range, where only an explicit bind takes one, and each pytest-xdist
    worker walks its own slice of them, so two test processes never pick the same port.
    """
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0) % workers
    width = (_ephemeral_low() - _LOWEST_PORT) // workers
    low = _LOWEST_PORT + worker * width
    if not _next_port:
        _next_port.append(low + (os.getpid() * 7919) % (width - 1))
    for _ in range(width):
        port = _next_port[0]
        _next_port[0] = low + (port + (2 if pair else 1) - low) % (width - 1)
        try:
            for candidate in (port, port + 1) if pair else (port,):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no free port in {low}..{low + width - 1}")


def make_config(kind: str, world_size: int, tmp_path: Any = None, **sections: dict) -> dict:
    """A config dict whose [[workers]] let rank 0 be found without environment variables."""
    # Only rank 0 needs a known port (the others find it there); the others bind port 0 and
    # advertise the port they got, so no port picked here can be taken by another process before
    # its worker binds it.
    workers = [{"name": f"worker{r}", "host": "127.0.0.1", "port": free_port() if kind == "tcp" and r == 0 else 0}
               for r in range(world_size)]
    # heartbeat_timeout_s as the product's default: worker threads of a loaded test process can
    # go quiet for seconds; the tests of liveness set their own.
    transport = {"kind": kind, "connect_timeout_s": 20.0, "heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 10.0}
    if kind == "ipc" and tmp_path is not None:
        transport["ipc_dir"] = str(tmp_path)
    config = {"transport": transport, "rpc": {"num_worker_threads": 4, "default_timeout_s": 20.0,
                                               "allowed_modules": ["rpc_targets"]}, "workers": workers}
    for name, values in sections.items():
        config.setdefault(name, {}).update(values)
    return config


def run_workers(world_size: int, config: dict, body: Callable[[int], Any], timeout_s: float = 60.0,
                shutdown: bool = True, ranks: Sequence[int] | None = None) -> list[Any]:
    """Run ``body(rank)`` on every worker (or only on ``ranks``, the others running elsewhere, e.g.
    in a :func:`peer_process`); return the results by rank, raising the first error."""
    results: list[Any] = [None] * world_size
    errors: list[BaseException | None] = [None] * world_size
    ranks = range(world_size) if ranks is None else ranks

    def worker(rank: int) -> None:
        try:
            rpc.init_rpc(f"worker{rank}", rank=rank, world_size=world_size, config=config)
            try:
                results[rank] = body(rank)
            finally:
                if shutdown:
                    rpc.shutdown()
        except BaseException as exc:  # noqa: BLE001 - reported below
            exc.add_note(f"on worker{rank}:\n{traceback.format_exc()}")
            errors[rank] = exc

    join_threads([threading.Thread(target=worker, args=(r,), name=f"test-worker{r}") for r in ranks], timeout_s)
    raised = [error for error in errors if error is not None]
    if raised:
        # A worker that failed on its own makes the others time out waiting for it: raise that one.
        first = next((e for e in raised if not isinstance(e, ZgradTimeoutError)), raised[0])
        for other in raised:
            if other is not first:
                first.add_note(f"also: {type(other).__name__}: {other}")
        raise first
    return results


def join_threads(threads: Sequence[threading.Thread], timeout_s: float) -> None:
    """Start ``threads`` and wait for all (bounded); fail naming the ones still running."""
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"threads did not finish within {timeout_s} s: {stuck}"


def poll(fetch: Callable[[], Any], done: Callable[[Any], bool], timeout_s: float = 10.0) -> Any:
    """Call ``fetch()`` until ``done(value)`` or ``timeout_s`` passed; return the last value (for
    state that settles in the background, e.g. RRef deletes and context releases)."""
    deadline = time.monotonic() + timeout_s
    value = fetch()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.02)
        value = fetch()
    return value


# How long a child worker may take to import what it needs. Imports are not part of the job's
# start-up, which connect_timeout_s bounds: on a loaded machine they can take longer than it.
CHILD_IMPORT_TIMEOUT_S = 120.0


@contextlib.contextmanager
def child_worker(script: str, argv: Sequence[str], label: str) -> Iterator[subprocess.Popen]:
    """Run ``tests/<script>`` with ``argv`` in a process of its own and yield it once it has
    printed "imported" (its imports done, before it joins the job), so that a job's start-up
    timeout is not spent importing. The process is killed and reaped on exit, whatever
    happened; a failing test shows its output, labelled ``label``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryFile("w+") as output:
        child = subprocess.Popen([sys.executable, str(HERE / script), *argv], env=env, stdout=output,
                                 stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + CHILD_IMPORT_TIMEOUT_S
            while "imported\n" not in _written(output):
                if child.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{label} (pid {child.pid}) exited with {child.returncode} or did not finish "
                                       f"its imports within {CHILD_IMPORT_TIMEOUT_S:g} s")
                time.sleep(0.02)
            yield child
        except BaseException as exc:
            exc.add_note(f"output of {label} (pid {child.pid}):\n{_written(output)[-4000:]}")
            raise
        finally:
            child.kill()  # SIGKILL also ends a stopped (SIGSTOP) process
            child.wait(10)


def _written(output) -> str:
    """What the child has written to ``output`` so far. Read with pread: the child writes through
    the same open file, so a seek here would move the offset its next write lands at (under
    PYTHONUNBUFFERED, print's text and its newline are two writes, and a seek between them put
    the newline over the text's first letter)."""
    chunks, offset = [], 0
    while chunk := os.pread(output.fileno(), 1 << 16, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks).decode(errors="replace")


def peer_process(config: dict, rank: int, world_size: int) -> contextlib.AbstractContextManager[subprocess.Popen]:
    """Worker ``rank`` in a process of its own (``tests/support/rpc_peer.py``), for the tests that kill or
    stop it; see :func:`child_worker`."""
    return child_worker("rpc_peer.py", [json.dumps(config), str(rank), str(world_size)], f"worker{rank}")


# --- distributed autograd counters ---------------------------------------------------------

COUNTERS = ("num_autograd_contexts", "num_current_backward_passes")


def settled_counters(ranks: "int | Sequence[int]", keys: Sequence[str] = COUNTERS, timeout_s: float = 10.0) -> list:
    """The distributed autograd counters of the workers ``ranks`` (an int: all of them), polled
    until ``keys`` are 0 on every one (at most ``timeout_s``): contexts are released in the
    background, so they reach 0 soon after the ``with`` block exits, not at that instant."""
    import rpc_targets as T

    names = [f"worker{r}" for r in (range(ranks) if isinstance(ranks, int) else ranks)]
    return poll(lambda: [rpc.rpc_sync(name, T.dist_debug_info) for name in names],
                lambda counters: all(c[k] == 0 for c in counters for k in keys), timeout_s)


def assert_settled(counters: list, keys: Sequence[str] = COUNTERS) -> None:
    """Every worker's ``keys`` counters are 0."""
    for key in keys:
        assert [c[key] for c in counters] == [0] * len(counters), key
