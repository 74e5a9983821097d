"""Worlds of meshes over every built-in transport, in one process, for the transport tests.

Every mesh here lives on loopback (127.0.0.1, ipc in a short temporary directory, inproc) and
binds port 0; the ``worlds`` fixture (conftest.py) closes every mesh a test made.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import zmq

from zgrad.config import Config, parse_config
from zgrad.transport import Envelope, Mesh, create_mesh
from zgrad.transport import frames as fr
from zgrad.transport.loop.inbound import routing_id

TRANSPORTS = ("tcp", "ipc", "inproc")
KINDS = frozenset({1, 2, 3})
REPLY_KINDS = frozenset({3})  # the tests' replies (``Mesh.reply``): routed to a waiting thread
WAIT_S = 10.0


@dataclass
class Worker:
    """One mesh plus what it received: envelopes and lost peers, in arrival order."""

    mesh: Mesh
    inbox: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    lost: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)

    def get(self, timeout_s: float = WAIT_S) -> Envelope:
        return self.inbox.get(timeout=timeout_s)

    def get_many(self, n: int, timeout_s: float = WAIT_S) -> list[Envelope]:
        return [self.inbox.get(timeout=timeout_s) for _ in range(n)]


def make_config(kind: str, ipc_dir: str, security: dict | None = None, **transport: Any) -> Config:
    raw = {
        "job": {"name": f"t{uuid.uuid4().hex[:10]}"},
        "transport": {"kind": kind, "ipc_dir": ipc_dir, "connect_timeout_s": 10.0, **transport},
        "security": security or {},
    }
    return parse_config(raw)


class WorldFactory:
    """Builds started worlds and closes every mesh it made."""

    def __init__(self, ipc_dir: str):
        self.ipc_dir = ipc_dir
        self.meshes: list[Mesh] = []

    def config(self, kind: str, security: dict | None = None, **transport: Any) -> Config:
        return make_config(kind, self.ipc_dir, security, **transport)

    def workers(self, config: Config, world_size: int, kinds: frozenset[int] = KINDS,
                on_message: Any = None, defer_cma_reads: bool = False) -> list[Worker]:
        """Create (not start) every worker; rank 0 is bound so tcp peers can find its port."""
        workers: list[Worker] = []
        port = None
        for rank in range(world_size):
            worker = Worker(mesh=None)  # type: ignore[arg-type]
            handler = on_message(rank, worker) if on_message else worker.inbox.put
            worker.mesh = create_mesh(
                config, rank, world_size, f"w{rank}", on_message=handler,
                on_peer_lost=lambda r, why, w=worker: w.lost.put((r, why)), valid_kinds=kinds,
                master_addr="127.0.0.1" if port else None, master_port=port, defer_cma_reads=defer_cma_reads,
                reply_kinds=REPLY_KINDS & kinds,
            )
            self.meshes.append(worker.mesh)
            if rank == 0 and config.transport.kind == "tcp":
                port = int(worker.mesh.bind().rsplit(":", 1)[1])
            workers.append(worker)
        return workers

    def start(self, workers: list[Worker], timeout_s: float = 30.0) -> None:
        start_all([w.mesh for w in workers], timeout_s)

    def world(self, kind: str, world_size: int, kinds: frozenset[int] = KINDS, on_message: Any = None,
              defer_cma_reads: bool = False, **transport: Any) -> list[Worker]:
        workers = self.workers(self.config(kind, **transport), world_size, kinds, on_message, defer_cma_reads)
        self.start(workers)
        return workers

    def close_all(self) -> None:
        for mesh in self.meshes:
            mesh.close(timeout_s=2.0)


def start_all(meshes: list[Mesh], timeout_s: float = 30.0) -> list[BaseException | None]:
    """Start meshes concurrently (start() blocks until all are up); raise the first error."""
    errors: list[BaseException | None] = [None] * len(meshes)

    def run(i: int) -> None:
        try:
            meshes[i].start()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(meshes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "start() did not return in time"
    for error in errors:
        if error is not None:
            raise error
    return errors


# --- a peer played by hand over raw sockets (fuzz and forgery tests) ---------------------------


def control(kind, meta=None, request_id=0):
    """The frames of a transport control message, as a raw peer sends them."""
    return fr.encode(kind, 0, request_id, fr.encode_meta(meta), [], 1 << 20)


def recv_kind(sock, kind, valid_kinds=frozenset({1, 2}), timeout_s=10.0, seen=None):
    """Receive on a raw ROUTER until a message of ``kind`` arrives; return its meta (other
    messages go to ``seen`` when given)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if sock.poll(100):
            parts = sock.recv_multipart()
            got = fr.decode(parts[1:], valid_kinds=valid_kinds, max_message_bytes=1 << 30, take_buffer=bytearray)
            if got[0] == kind:
                return got[3]
            if seen is not None:
                seen.append(got)
    raise AssertionError(f"no message of kind {kind:#x} within {timeout_s} s")


RAW_PEER_SESSION = 0x5EED


class RawPeer(NamedTuple):
    raw_in: zmq.Socket  # ROUTER bound here: what the mesh sends to rank 1 arrives on it
    raw_out: zmq.Socket  # DEALER connected to the mesh, announcing itself as rank 1
    ctx: zmq.Context
    table: Any  # the worker table the mesh handed out


@contextlib.contextmanager
def raw_peer_joined(mesh: Mesh, endpoint: str, name: str,
                    before_start_ends: Callable[[zmq.Socket, zmq.Socket], None] | None = None) -> Iterator[RawPeer]:
    """Play rank 1 of a world of two by hand, over raw tcp sockets, against ``mesh`` (rank 0, bound
    at ``endpoint``, not started): register, take the table, answer HELLO, decline the mesh's
    cross-memory offer; ``before_start_ends(raw_in, raw_out)`` may add to the exchange before the
    mesh's ``start`` returns. Closes the mesh, then the sockets, on the way out."""
    ctx = zmq.Context()
    raw_in, raw_out = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    for sock in (raw_in, raw_out):
        sock.linger = 0
    raw_in.bind("tcp://127.0.0.1:0")
    raw_out.routing_id = routing_id(1, RAW_PEER_SESSION)
    raw_out.connect(endpoint)
    started = threading.Thread(target=mesh.start)
    started.start()
    try:
        raw_out.send_multipart(control(fr.KIND_REGISTER, {
            "rank": 1, "name": name, "endpoint": raw_in.last_endpoint.decode(), "stream": "", "world_size": 2,
            "transport": "tcp", "curve": False}))
        table = recv_kind(raw_in, fr.KIND_TABLE)
        recv_kind(raw_in, fr.KIND_HELLO)
        raw_out.send_multipart(control(fr.KIND_HELLO_ACK))
        recv_kind(raw_in, fr.KIND_CMA_OFFER)  # start() waits for the answer: this peer reads no tickets
        raw_out.send_multipart(control(fr.KIND_CMA_READY, {"readable": False}))
        if before_start_ends is not None:
            before_start_ends(raw_in, raw_out)
        started.join(10)
        assert not started.is_alive(), "the mesh did not finish starting"
        yield RawPeer(raw_in, raw_out, ctx, table)
    finally:
        mesh.close(timeout_s=0.5)
        started.join(10)
        raw_in.close(0)
        raw_out.close(0)
        ctx.term()


@contextlib.contextmanager
def target_with_raw_peer(job: str, connect_timeout_s: float,
                         kinds: frozenset[int] = frozenset({1, 2})) -> Iterator[tuple[Mesh, queue.SimpleQueue, RawPeer, str]]:
    """Rank 0 of a tcp world of two ("target", heartbeats every 0.1 s, no silence timeout in a
    test's time) joined by :func:`raw_peer_joined`: ``(mesh, inbox, peer, endpoint)``."""
    config = parse_config({"job": {"name": job}, "transport": {
        "kind": "tcp", "connect_timeout_s": connect_timeout_s, "heartbeat_interval_s": 0.1, "heartbeat_timeout_s": 60.0}})
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    mesh = create_mesh(config, 0, 2, "target", on_message=inbox.put, on_peer_lost=print, valid_kinds=kinds)
    endpoint = mesh.bind()
    with raw_peer_joined(mesh, endpoint, "raw") as peer:
        yield mesh, inbox, peer, endpoint
