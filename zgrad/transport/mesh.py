"""The public face of the transport: :func:`create_mesh` and :class:`Mesh`.

Example (two workers as threads of one process, over inproc)::

    from zgrad.config import parse_config
    from zgrad.transport import create_mesh

    config = parse_config({"transport": {"kind": "inproc"}})

    def make(rank):
        return create_mesh(config, rank, 2, f"w{rank}", on_message=print,
                           on_peer_lost=lambda r, why: None, valid_kinds={1})

    a, b = make(0), make(1)
    # start() blocks until every worker is up, so start the two concurrently
    threading.Thread(target=b.start).start(); a.start()
    a.send(1, kind=1, request_id=7, meta={"hello": "world"}, buffers=[b"raw bytes"])
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from zgrad.config import Config
from zgrad.errors import TransportError, ZgradTimeoutError
from zgrad.transport import frames as fr
from zgrad.transport.base import EndpointRequest, Transport
from zgrad.transport.cma import TicketTable, make_ticket_table
from zgrad.transport.caller_sockets import WAIT_SLICE_S, CallerSockets
from zgrad.transport.envelope import Envelope, WorkerEntry
from zgrad.transport.io_loop import IoLoop
from zgrad.transport.link_replies import LinkReplies
from zgrad.transport.outbox import Outbox
from zgrad.transport.rendezvous import Rendezvous
from zgrad.transport.role import MeshRole
from zgrad.transport.security import CurveKeys
from zgrad.transport.sockets import MeshSockets, open_sockets
from zgrad.transport.stats import TransportStats
from zgrad.transport.stream_inbound import StreamConnection
from zgrad.transport.streams import listen, stream_address

__all__ = ["Mesh"]

_log = logging.getLogger("zgrad.transport")
# Beyond connect_timeout_s, how long start() waits for the I/O thread to report; and beyond
# the goodbye timeout, how long close() waits for it to finish its turn and close the sockets.
_POLLIN = int(zmq.POLLIN)
_SETTLE_GRACE_S = 5.0
_JOIN_GRACE_S = 5.0


class Mesh:
    """One worker's place in the broker-less mesh: an inbound socket, one link per peer, one I/O thread.

    Created by :func:`create_mesh`. Lifecycle: ``bind()`` (optional) -> ``start()`` -> ``send()``
    ... -> ``close()``; also a context manager that closes on exit. All methods are thread-safe.
    """

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

    def __enter__(self) -> Mesh:
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

    def send(
        self,
        dst_rank: int,
        kind: int,
        request_id: int,
        meta: Any = None,
        buffers: Sequence[Any] = (),
        flags: int = 0,
    ) -> None:
        """Queue one message to ``dst_rank`` (this worker's own rank included). Thread-safe.

        Messages from one worker to another arrive in the order ``send`` was called (for calls
        from one thread; calls from several threads arrive in the order they took the queue).
        Buffers are not copied (except over inproc): do not modify them after sending. A buffer
        of at least ``transport.cma_min_kb`` to a peer on this host is read by the peer's I/O
        thread straight from this memory (cross-memory attach), so that window lasts until the
        peer has received the message.

        Args:
            dst_rank: the receiver's rank.
            kind: one of this mesh's ``valid_kinds``.
            request_id: unsigned 64-bit value handed to the receiver as is.
            meta: any msgpack-serializable value.
            buffers: buffer-protocol objects (bytes, bytearray, memoryview, C-contiguous arrays).
            flags: unsigned 16-bit value handed to the receiver as is.

        Blocks only while ``dst_rank`` has ``transport.high_water_mark`` messages waiting,
        at most ``transport.send_timeout_s``; never on the I/O thread.

        Raises:
            WorkerUnavailableError: ``dst_rank`` is known to be dead (at once).
            TransportError: the mesh is not started or closed, or the message exceeds
                ``transport.max_message_mb``.
            ZgradTimeoutError: no room for ``dst_rank`` within ``transport.send_timeout_s``.
            ValueError: bad ``dst_rank``, ``kind``, ``request_id`` or ``flags``.
            TypeError: ``meta`` is not msgpack-serializable or a buffer is not a contiguous buffer.
        """
        started = self._loop is not None and self._loop.table is not None
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, started)
        self._put(dst_rank, kind, flags, request_id, meta_bytes, views, nbytes)

    def _put(self, dst_rank: int, kind: int, flags: int, request_id: int, meta_bytes: bytes, views: list,
             nbytes: int) -> None:
        """Encode a checked message (big buffers to a peer on this host by ticket) into the outbox."""
        tickets = self._tickets
        issued = None
        try:
            if tickets is not None and views:
                views, issued = tickets.attach(dst_rank, views)
            frames = fr.encode(kind, flags, request_id, meta_bytes, views, self._chunk_bytes)
            self._outbox.put(dst_rank, (dst_rank, frames, nbytes, None))
        except BaseException:
            if issued:
                tickets.cancel(issued)
            raise

    def _frames(self, dst_rank: int, kind: int, request_id: int, meta: Any, buffers: Sequence[Any]) -> tuple[list, int]:
        """Check and encode one message that goes without cross-memory attach; (frames, buffer bytes)."""
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, self._callers_ready())
        return fr.encode(kind, 0, request_id, meta_bytes, views, self._chunk_bytes), nbytes

    def _callers_ready(self) -> bool:
        return self._callers is not None and self._loop.table is not None

    def _checked(self, dst_rank: int, kind: int, meta: Any, buffers: Sequence[Any],
                 started: bool) -> tuple[list, bytes, int]:
        """Check a message to send and encode its metadata: (buffer views, meta bytes, buffer bytes)."""
        if kind not in self._valid_kinds:
            raise ValueError(f"message kind {kind!r} is not in this mesh's valid_kinds {sorted(self._valid_kinds)}")
        if not 0 <= dst_rank < self.world_size:
            raise ValueError(f"dst_rank {dst_rank!r} is out of range 0..{self.world_size - 1}")
        if not started:
            raise TransportError(f"the mesh of worker {self.name!r} is not started: call start() first")
        views = []
        nbytes = 0
        for buffer in buffers:
            view = fr.as_byte_view(buffer)
            views.append(view)
            nbytes += view.nbytes
        meta_bytes = fr.encode_meta(meta)
        if nbytes + len(meta_bytes) > self._max_bytes:
            raise TransportError(
                f"message to {self.describe(dst_rank)} is {nbytes + len(meta_bytes)} bytes; the cap is "
                f"{self._max_bytes} (transport.max_message_mb): split it or raise the cap on every worker"
            )
        return views, meta_bytes, nbytes

    def call(self, dst_rank: int, kind: int, request_id: int, meta: Any, buffers: Sequence[Any],
             timeout_s: float) -> Envelope:
        """Send one request to ``dst_rank`` and wait on the calling thread for its reply, which
        the callee sends with :meth:`reply`. Blocks. Thread-safe.

        The route is the mesh's (see the module's table): with less than
        ``transport.direct_max_kb`` of buffers, the calling thread's own socket, where the reply
        comes back (no I/O thread on this side); with more, the link, where the request and its
        reply may go by same-host single copy, and the leader hands the reply to this thread.
        Either way the request is not ordered with the messages of :meth:`send`.

        Args:
            dst_rank, kind, request_id, meta, buffers: as for :meth:`send`; ``request_id`` must
                be unique among this worker's requests in flight.
            timeout_s: longest wait for the reply; 0 waits as long as the peer lives.

        Returns:
            The reply, an :class:`Envelope` with the same ``request_id``.

        Raises:
            WorkerUnavailableError: ``dst_rank`` is (or, while waiting, was declared) lost.
            ZgradTimeoutError: no reply within ``timeout_s`` (a later reply is dropped and counted).
            TransportError: the mesh is not started or closed, or the message is over the cap.
            ValueError, TypeError: as for :meth:`send`.
        """
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, self._callers_ready())
        deadline_s = time.monotonic() + timeout_s if timeout_s > 0 else None
        if nbytes < self._direct_max_bytes:
            frames = fr.encode(kind, 0, request_id, meta_bytes, views, self._chunk_bytes)
            return self._callers.call(dst_rank, request_id, frames, deadline_s)
        inbox = self._link_replies.expect(dst_rank, request_id)
        try:
            self._put(dst_rank, kind, 0, request_id, meta_bytes, views, nbytes)
            self.role.hand_off()
            expected = {dst_rank: {request_id}}
            while True:
                replies = self._take_routed(inbox, expected)
                if replies:
                    return replies[0]
                wait_s = WAIT_SLICE_S if deadline_s is None else min(WAIT_SLICE_S, deadline_s - time.monotonic())
                if wait_s <= 0 or not zmq.zmq_poll([(inbox.fd, _POLLIN)], int(wait_s * 1000) + 1):
                    self._callers.check_waiting(dst_rank, deadline_s)
        finally:
            self._link_replies.forget(dst_rank, request_id)

    def post(self, dst_rank: int, kind: int, request_id: int, meta: Any, buffers: Sequence[Any]) -> None:
        """Send one request to ``dst_rank`` and return at once: the calling thread collects its
        reply with :meth:`collect` (it must: replies to it go nowhere else). Routed as
        :meth:`call` routes; not ordered with :meth:`send`. Blocks only while the socket is not
        connected yet or the peer has no room, at most ``transport.send_timeout_s``.
        Thread-safe; raises as :meth:`send` does."""
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, self._callers_ready())
        if nbytes < self._direct_max_bytes:
            frames = fr.encode(kind, 0, request_id, meta_bytes, views, self._chunk_bytes)
            self._callers.post(dst_rank, frames, self._config.transport.send_timeout_s)
            return
        self._link_replies.expect(dst_rank, request_id)
        try:
            self._put(dst_rank, kind, 0, request_id, meta_bytes, views, nbytes)
        except BaseException:
            self._link_replies.forget(dst_rank, request_id)
            raise

    def collect(self, expected: dict[int, set[int]], wake_fd: int | None, timeout_s: float) -> list[Envelope]:
        """Collect replies to the calling thread's :meth:`post` requests. Blocks at most
        ``timeout_s`` (and at most one wait slice, 50 ms). Thread-safe (each thread its own).

        Args:
            expected: rank -> the request ids awaited from it; the ids of the replies returned
                are removed from it. A reply to another request is dropped (``late_replies``).
            wake_fd: also return (maybe with nothing) when this file descriptor is readable.
            timeout_s: longest wait.

        Returns:
            The replies that arrived, in no particular order; maybe none.
        """
        inbox = self._link_replies.mine()
        if inbox is None:
            return self._callers.collect(expected, [] if wake_fd is None else [wake_fd], timeout_s)
        replies = self._take_routed(inbox, expected)
        if replies:
            return replies
        replies = self._callers.collect(expected, [inbox.fd] if wake_fd is None else [inbox.fd, wake_fd], timeout_s)
        return replies + self._take_routed(inbox, expected)

    def _take_routed(self, inbox: Any, expected: dict[int, set[int]]) -> list[Envelope]:
        """The replies routed from the link to the calling thread's ``inbox`` that ``expected``
        awaits (removed from it); the others are late (their waiter gave up): dropped, counted."""
        replies = []
        for reply in self._link_replies.take(inbox):
            ids = expected.get(reply.src)
            if ids is not None and reply.request_id in ids:
                ids.discard(reply.request_id)
                replies.append(reply)
                continue
            self._routed_late += 1
            if self._on_late_reply is not None:
                self._on_late_reply(reply.src, reply.request_id)
        return replies

    def awaits(self, dst_rank: int, request_id: int) -> bool:
        """Whether the reply to the calling thread's :meth:`post` request ``request_id`` to
        ``dst_rank`` can still arrive (False once the connection it went on ended or the peer
        was lost). Thread-safe."""
        if self._link_replies.awaits(dst_rank, request_id):
            return True
        return self._callers is not None and self._callers.has_socket(dst_rank)

    def reply(self, to: Envelope, kind: int, meta: Any = None, buffers: Sequence[Any] = ()) -> None:
        """Answer the message ``to`` where its sender waits: on the caller-direct socket it came
        from, else as :meth:`send` to its sender (with ``to.request_id``). Thread-safe; raises as
        :meth:`send` does."""
        if to.reply_to is None:
            self.send(to.src, kind, to.request_id, meta, buffers)
            return
        frames, nbytes = self._frames(to.src, kind, to.request_id, meta, buffers)
        if type(to.reply_to) is StreamConnection:
            # Written by this thread, whichever it is; dropped if the caller's connection is gone.
            to.reply_to.reply(frames)
            return
        self._outbox.check(to.src)
        if not self._loop.reply_now(to.src, to.reply_to, frames, nbytes):
            self._outbox.put(to.src, (to.src, frames, nbytes, to.reply_to))

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

    @property
    def workers(self) -> tuple[WorkerEntry, ...]:
        """The worker table, by rank. Available once start-up has the table.

        Raises:
            TransportError: the mesh has not been started.
        """
        table = self._loop.table if self._loop is not None else None
        if table is None:
            raise TransportError(f"the worker table of {self.name!r} is not known yet: call start() first")
        return table

    def rank_of(self, name: str) -> int:
        """Return the rank of the worker called ``name``.

        Raises:
            KeyError: no worker has that name (the message lists them).
            TransportError: the mesh has not been started.
        """
        for entry in self.workers:
            if entry.name == name:
                return entry.rank
        raise KeyError(f"no worker named {name!r}; workers: {', '.join(e.name for e in self.workers)}")

    def is_alive(self, rank: int) -> bool:
        """Whether ``rank`` has not been declared lost. Thread-safe."""
        return self._outbox.dead_reason(rank) is None

    def stats(self) -> dict:
        """Return a snapshot of the counters. Thread-safe.

        Keys (absent until non-zero): ``messages_out``, ``bytes_out``, ``messages_in``,
        ``bytes_in`` (buffer bytes of user messages; loopback ones included, also counted in
        ``loopback``; replies received on caller-direct sockets included), ``heartbeats_out``,
        ``heartbeats_in``, ``control_in`` (start-up messages accepted), ``peers_lost``, ``dropped``
        (messages to a lost peer), ``callback_errors``, ``handshake_failed``, ``auth_denied``,
        ``direct_requests`` and ``late_replies`` (caller-direct requests made here, and replies
        to them that came after their caller gave up), ``link_thread_writes`` (messages, also in
        ``messages_out``, that a thread other than the I/O thread wrote on a stream link itself), ``cma_sent``/``cma_bytes_out`` (buffers sent by ticket), ``cma_received``/``cma_bytes_in``
        (buffers read from peers), ``cma_no_ticket`` (big buffers sent inline: the table was
        full or ``high_water_mark`` tickets were open to that peer), ``cma_peers_readable``
        (peers this worker reads); always present: ``rejected`` (reason -> count),
        ``rejected_total``, ``pool_reused``, ``pool_allocated``,
        ``cma_peers`` (peers that read this worker's tickets), ``cma_tickets_open`` (tickets not
        yet reported done; back to 0 when every message was received).
        """
        out = self._stats.snapshot()
        tickets = self._tickets
        out["cma_peers"] = len(tickets.readers) if tickets is not None else 0
        out["cma_tickets_open"] = tickets.open_count if tickets is not None else 0
        if tickets is not None:
            for key, value in (("cma_sent", tickets.sent), ("cma_bytes_out", tickets.bytes_out),
                               ("cma_no_ticket", tickets.no_ticket)):
                if value:
                    out[key] = value
        direct = self._callers
        if direct is not None:
            for key, value in (("direct_requests", direct.requests), ("late_replies", direct.late_replies + self._routed_late)):
                if value:
                    out[key] = value
            for key, value in (("messages_in", direct.replies_in), ("bytes_in", direct.reply_bytes_in)):
                if value:
                    out[key] = out.get(key, 0) + value
        if self._loop is not None:
            writes, nbytes = self._loop.link_thread_writes()
            if writes:
                out["link_thread_writes"] = writes
                out["messages_out"] = out.get("messages_out", 0) + writes
                if nbytes:
                    out["bytes_out"] = out.get("bytes_out", 0) + nbytes
        pool = self._loop.pool if self._loop is not None else None
        out["pool_reused"] = pool.reused if pool is not None else 0
        out["pool_allocated"] = pool.allocated if pool is not None else 0
        return out
