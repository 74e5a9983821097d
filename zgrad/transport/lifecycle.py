"""A mesh's life: its state, binding, start-up (rendezvous and the I/O loop), closing.

:class:`MeshLifecycle` is the half of :class:`~zgrad.transport.mesh.Mesh` that makes, starts and
stops the sockets and threads; the other half (``mesh.py``) is the send surface and the route
each message takes.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from zgrad.config import Config
from zgrad.errors import TransportError, ZgradTimeoutError
from zgrad.transport.base import EndpointRequest, Transport
from zgrad.transport.caller_sockets import CallerSockets
from zgrad.transport.cma_tickets import TicketTable, make_ticket_table
from zgrad.transport.envelope import Envelope, WorkerEntry
from zgrad.transport.link_replies import LinkReplies
from zgrad.transport.loop.io_loop import IoLoop
from zgrad.transport.loop.outbox import Outbox
from zgrad.transport.loop.role import MeshRole
from zgrad.transport.rendezvous import Rendezvous
from zgrad.transport.security import CurveKeys
from zgrad.transport.sockets import MeshSockets, open_sockets
from zgrad.transport.stats import TransportStats
from zgrad.transport.streams import listen, stream_address

__all__ = ["MeshLifecycle"]

_log = logging.getLogger("zgrad.transport")
# Beyond connect_timeout_s, how long start() waits for the I/O thread to report; and beyond
# the goodbye timeout, how long close() waits for it to finish its turn and close the sockets.
_SETTLE_GRACE_S = 5.0
_JOIN_GRACE_S = 5.0


class MeshLifecycle:
    """The state of one worker's mesh, and ``bind()`` -> ``start()`` -> ``close()``. Thread-safe.
    Use it as :class:`~zgrad.transport.mesh.Mesh`, made by :func:`~zgrad.transport.create.create_mesh`."""

    def __init__(
        self,
        config: Config,
        request: EndpointRequest,
        world_size: int,
        transport: Transport,
        keys: CurveKeys | None,
        rank0_endpoint: str | None,
        valid_kinds: frozenset[int],
        on_message: Callable[[Envelope], None],
        on_peer_lost: Callable[[int, str], None],
        defer_cma_reads: bool = False,
        on_thread_start: Callable[[], None] | None = None,
        max_in_handlers: int = 16,
        on_late_reply: Callable[[int, int], None] | None = None,
        reply_kinds: frozenset[int] = frozenset(),
    ):
        self._config = config
        self._on_thread_start = on_thread_start
        self._max_in_handlers = max_in_handlers
        self._on_late_reply = on_late_reply
        self._defer_cma_reads = defer_cma_reads
        self._request = request
        self.rank = request.rank
        self.world_size = world_size
        self.name = request.name
        self.transport = transport
        self._keys = keys
        self._rank0_endpoint = rank0_endpoint
        self._valid_kinds = valid_kinds
        self._on_message = on_message
        self._on_peer_lost = on_peer_lost
        self._chunk_bytes = config.transport.chunk_mb << 20
        self._max_bytes = config.transport.max_message_mb << 20
        self._session = secrets.randbits(64)
        self._lock = threading.Lock()
        self._sockets: MeshSockets | None = None
        self._endpoint: str | None = None
        self._loop: IoLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._tickets: TicketTable | None = None
        self._callers: CallerSockets | None = None
        self._direct_max_bytes = config.transport.direct_max_kb << 10
        self._link_replies = LinkReplies(reply_kinds)
        self._routed_late = 0
        self.role = MeshRole()
        self._stats = TransportStats(self.name, _log)
        self._outbox = Outbox(config.transport.high_water_mark, config.transport.send_timeout_s, self.describe)

    def __enter__(self) -> MeshLifecycle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def endpoint(self) -> str | None:
        """The endpoint peers dial to reach this worker, once bound; else ``None``."""
        return self._endpoint

    def describe(self, rank: int) -> str:
        """Return ``"worker 'name' (rank r)"`` for error messages (the name once the table is known)."""
        table = self._loop.table if self._loop is not None else None
        return f"worker {table[rank].name!r} (rank {rank})" if table is not None else f"worker rank {rank}"

    def bind(self) -> str:
        """Bind the inbound socket now (``start`` does it otherwise) and return the dialable endpoint.

        Useful when rank 0 binds port 0 and must tell others its port before ``start`` blocks.
        Does not block. Idempotent.

        Raises:
            TransportError: the endpoint cannot be bound, or the mesh is closed.
            ConfigError: the bound address cannot be advertised to peers.
        """
        with self._lock:
            if self._closed:
                raise TransportError(f"the mesh of worker {self.name!r} is closed; create a new one")
            if self._sockets is None:
                context = self.transport.acquire_context()
                try:
                    sockets = open_sockets(
                        context, self.transport.bind_endpoint(self._request), self._config.transport, self._keys, self.name
                    )
                except BaseException:
                    self.transport.release_context(context)
                    raise
                try:
                    self._endpoint = self.transport.advertised_endpoint(self._request, sockets.bound_endpoint)
                except BaseException:
                    sockets.close()
                    self._release(sockets)
                    raise
                self._open_stream_listener(sockets)
                self._sockets = sockets
            return self._endpoint

    def _open_stream_listener(self, sockets: MeshSockets) -> None:
        """Listen for peers' links and caller-direct requests on a stream socket beside the ZeroMQ endpoint
        (``streams.py``), where one fits: CURVE off, a tcp or ipc endpoint, ``direct_streams``.
        A failure to bind only costs speed: callers then use ZeroMQ (logged)."""
        if self._keys is not None or not self._config.transport.direct_streams:
            return
        where = stream_address(sockets.bound_endpoint, self._endpoint)
        if where is None:
            return
        try:
            sockets.stream_listener, sockets.stream_address = listen(*where)
        except OSError as exc:
            _log.warning("worker %r: no stream socket beside %s (%s); links and caller-direct requests to it use ZeroMQ",
                         self.name, self._endpoint, exc)

    def start(self) -> None:
        """Bind, find every peer through rank 0, connect, and start the I/O thread.

        Blocks until every peer has acknowledged this worker (at most
        ``transport.connect_timeout_s`` plus a few seconds). On failure the mesh is closed.

        Raises:
            ZgradTimeoutError: some workers did not show up in time; the message names them.
            TransportError: binding failed, rank 0 aborted start-up (mismatched configs,
                duplicate ranks or names), or the mesh was closed meanwhile.
        """
        self.bind()
        with self._lock:
            if self._loop is not None or self._closed:
                raise TransportError(f"the mesh of worker {self.name!r} was already started; create a new one")
            t = self._config.transport
            me = WorkerEntry(self.rank, self.name, self._endpoint, self._session, self._sockets.stream_address)
            names = [w.name for w in self._config.workers]
            job = {"transport": self.transport.name, "curve": self._keys is not None}
            deadline_s = time.monotonic() + t.connect_timeout_s
            sockets = self._sockets
            self._outbox.attach(sockets.wake_tx)
            self._tickets = make_ticket_table(t, self.transport.shares_memory)
            self._callers = CallerSockets(
                sockets.context, t, self._keys, self.rank, self._session,
                endpoint_of=lambda rank: self._loop.table[rank].endpoint, dead_reason=self._outbox.dead_reason,
                stream_of=lambda rank: self._loop.table[rank].stream if t.direct_streams else "",
                valid_kinds=self._valid_kinds, before_wait=self.role.hand_off, describe=self.describe,
                wait_leading=self._wait_leading, copy_buffers=self.transport.shares_memory,
                on_late_reply=self._on_late_reply,
            )
            self._loop = IoLoop(
                sockets=sockets,
                me=me,
                world_size=self.world_size,
                config=self._config,
                copy_buffers=self.transport.shares_memory,
                keys=self._keys,
                valid_kinds=self._valid_kinds,
                on_message=self._on_message,
                on_peer_lost=self._peer_lost,
                outbox=self._outbox,
                stats=self._stats,
                make_rendezvous=lambda link: Rendezvous(
                    link, me, self.world_size, self._rank0_endpoint, job, names, t.connect_timeout_s, deadline_s
                ),
                release=lambda: self._release(sockets),
                logger=_log,
                tickets=self._tickets,
                defer_cma_reads=self._defer_cma_reads,
                on_thread_start=self._on_thread_start,
                max_in_handlers=self._max_in_handlers,
                link_replies=self._link_replies,
            )
            self.role.bind(self._loop.role)
            self._thread = self._loop.start()
        if not self._loop.settled.wait(t.connect_timeout_s + _SETTLE_GRACE_S):
            self.close()
            raise ZgradTimeoutError(f"worker {self.name!r}: the mesh I/O thread did not finish start-up in time")
        if self._loop.error is not None:
            self.close()
            raise self._loop.error

    def _wait_leading(self, sock: Any, timeout_s: float) -> bool | None:
        loop = self._loop
        return None if loop is None else loop.wait_as_leader(sock, timeout_s)

    def _peer_lost(self, rank: int, reason: str) -> None:
        """The I/O thread lost ``rank``: tell the layer above, then stop awaiting replies from it
        (a waiter that finds its reply no longer awaited finds the loss already known above)."""
        try:
            self._on_peer_lost(rank, reason)
        finally:
            self._link_replies.lost(rank)

    def _release(self, sockets: MeshSockets) -> None:
        if self._callers is not None:
            self._callers.close(f"the mesh of worker {self.name!r} is closed")
        self.transport.release_context(sockets.context)
        self.transport.cleanup(sockets.bound_endpoint)


    def close(self, timeout_s: float | None = None) -> None:
        """Say goodbye to every live peer, stop the I/O thread and close every socket (LINGER 0).

        Graceful: messages sent before ``close`` are handed to ZeroMQ, then each live peer is
        sent GOODBYE; the mesh waits until each peer acknowledged it (which, links being
        ordered, means it received everything sent before), said goodbye itself, or was lost,
        at most ``timeout_s`` (default ``transport.heartbeat_timeout_s``). Peers report this
        worker to their ``on_peer_lost`` with a reason saying it shut down.

        Idempotent; thread-safe. Blocks until the I/O thread is done (bounded), whichever call
        began the closing: a second ``close`` while another thread's is under way waits for it
        too. Called from ``on_message`` it only asks the thread to stop. Sends after ``close``
        raise TransportError. A new mesh may be created in the same process afterwards.
        """
        with self._lock:
            already_closing = self._closed
            self._closed = True
            thread, sockets, loop = self._thread, self._sockets, self._loop
            if not already_closing:
                if loop is not None and timeout_s is not None:
                    loop.close_timeout_s = timeout_s
                self._outbox.close(f"the mesh of worker {self.name!r} is closed")
                if thread is None and sockets is not None:
                    sockets.close()
                    self._release(sockets)
        if thread is not None and not loop.role.is_role_thread():
            join_s = loop.close_timeout_s + _JOIN_GRACE_S
            if not loop.finished.wait(join_s) and not already_closing:
                _log.error("worker %r: the mesh I/O thread did not stop within %s s", self.name, join_s)
            loop.role.join(_JOIN_GRACE_S)  # the standbys end at once; a thread still in a handler is left
