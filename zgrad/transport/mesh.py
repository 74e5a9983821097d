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
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from zgrad.config import Config
from zgrad.errors import ConfigError, TransportError, ZgradTimeoutError
from zgrad.transport import frames as fr
from zgrad.transport.base import EndpointRequest, Transport
from zgrad.transport.cma import TicketTable, make_ticket_table
from zgrad.transport.direct import DirectCaller
from zgrad.transport.envelope import Envelope, WorkerEntry
from zgrad.transport.io_loop import IoLoop
from zgrad.transport.outbox import Outbox
from zgrad.transport.registry import TransportRegistry, default_registry
from zgrad.transport.rendezvous import Rendezvous
from zgrad.transport.security import CurveKeys, load_curve_keys
from zgrad.transport.sockets import MeshSockets, open_sockets
from zgrad.transport.stats import TransportStats
from zgrad.transport.stream_inbound import StreamConnection
from zgrad.transport.streams import listen, stream_address

__all__ = ["Mesh", "create_mesh"]

_log = logging.getLogger("zgrad.transport")
# Beyond connect_timeout_s, how long start() waits for the I/O thread to report; and beyond
# the goodbye timeout, how long close() waits for it to finish its turn and close the sockets.
_SETTLE_GRACE_S = 5.0
_JOIN_GRACE_S = 5.0


def create_mesh(
    config: Config,
    rank: int,
    world_size: int,
    name: str,
    *,
    on_message: Callable[[Envelope], None],
    on_peer_lost: Callable[[int, str], None],
    valid_kinds: Iterable[int],
    master_addr: str | None = None,
    master_port: int | None = None,
    registry: TransportRegistry | None = None,
    defer_cma_reads: bool = False,
    on_thread_start: Callable[[], None] | None = None,
    max_in_handlers: int = 16,
    on_late_reply: Callable[[int, int], None] | None = None,
) -> Mesh:
    """Create (but do not start) this worker's mesh. Opens no socket and starts no thread.

    Args:
        config: the job configuration; ``[transport]``, ``[security]`` and ``[[workers]]`` are read.
        rank: this worker's rank, ``0 <= rank < world_size``.
        world_size: number of workers in the job.
        name: this worker's unique name (must equal ``workers[rank].name`` if the config lists workers).
        on_message: called with each inbound :class:`Envelope` on the thread that received it,
            the I/O role's leader (see ``role.py``), one message at a time in arrival order (each
            peer's messages in the order sent): the next message waits until this call returns
            or its thread loses the role. It may run a call itself; once what must happen in
            arrival order is done it calls :meth:`Mesh.allow_takeover`, after which a standby
            thread takes the role over if it runs past ``transport.inline_budget_ms``; before
            it blocks it calls :meth:`Mesh.hand_off`. May be called before :meth:`Mesh.start`
            returns, as soon as this worker has the worker table. Exceptions are logged and
            counted, not raised.
        on_peer_lost: called on the I/O thread with ``(rank, reason)`` once per peer that died,
            went silent past ``heartbeat_timeout_s``, or was lost when the I/O thread failed.
        valid_kinds: the message kinds the layer above sends and accepts, each in
            ``0 .. 0xFEFF``; any other inbound kind is rejected as bad input.
        master_addr: rank 0's host for torchrun-style rendezvous (``MASTER_ADDR``), read from the
            environment by the caller, never here.
        master_port: rank 0's port for that rendezvous (``MASTER_PORT``); rank 0 binds it.
        registry: where to look up ``[transport] kind``; the process-wide one by default.
        defer_cma_reads: hand buffers that arrive by cross-memory attach to ``on_message``
            unread, as :class:`~zgrad.transport.cma.RemoteRead` handles that the consumer reads
            (on its own thread, into their destination) or releases; see ``docs/transport.md``.
        on_thread_start: called first in every thread of the I/O role (e.g. to bind the layer
            above to it).
        max_in_handlers: how many ``on_message`` calls that ran past the budget may go on in
            threads of their own (beyond that, inbound messages wait for them).
        on_late_reply: called with ``(rank, request_id)`` of each reply to a caller-direct
            request (:meth:`Mesh.request`) that came after its caller gave up and was dropped,
            on the thread that read it.

    Returns:
        A :class:`Mesh` in the created state.

    Raises:
        ConfigError: unknown transport (the message lists the known ones), CURVE on a transport
            without it, missing key files, a ``[[workers]]`` list that does not fit, or no way
            to find rank 0.
        ValueError: ``rank``, ``world_size`` or ``valid_kinds`` out of range.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"mesh rank must be in 0..world_size-1 with world_size >= 1; got rank={rank}, world_size={world_size}")
    kinds = frozenset(valid_kinds)
    bad = sorted(k for k in kinds if not (isinstance(k, int) and 0 <= k <= fr.MAX_USER_KIND))
    if bad:
        raise ValueError(f"valid_kinds must be integers in 0..{fr.MAX_USER_KIND:#x} (0xFF00 and up are the transport's); got {bad}")
    workers = config.workers
    if workers and len(workers) != world_size:
        raise ConfigError(f"the config lists {len(workers)} [[workers]] but world_size is {world_size}; list every worker or none")
    if workers and workers[rank].name != name:
        raise ConfigError(f"worker name {name!r} does not match the config's workers[{rank}].name {workers[rank].name!r}")
    transport = (registry or default_registry()).get(config.transport.kind)
    keys = None
    if config.security.curve:
        if not transport.supports_curve:
            raise ConfigError(
                f"config key 'security.curve' = true is not available over transport {transport.name!r}: use tcp or ipc"
            )
        keys = load_curve_keys(config.security.key_dir, rank, world_size)
    request = EndpointRequest(config, rank, name, master_addr, master_port)
    rank0_endpoint = transport.rank0_endpoint(request) if rank != 0 else None
    if rank != 0 and rank0_endpoint is None:
        raise ConfigError(
            f"worker {name!r} (rank {rank}) cannot find rank 0 over {transport.name!r}: pass master_addr and "
            "master_port (MASTER_ADDR / MASTER_PORT) or list every worker with a port in [[workers]]"
        )
    return Mesh(config, request, world_size, transport, keys, rank0_endpoint, kinds, on_message, on_peer_lost,
                defer_cma_reads, on_thread_start, max_in_handlers, on_late_reply)


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
        self._direct: DirectCaller | None = None
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
            self._direct = DirectCaller(
                sockets.context, t, self._keys, self.rank, self._session,
                endpoint_of=lambda rank: self._loop.table[rank].endpoint, dead_reason=self._outbox.dead_reason,
                stream_of=lambda rank: self._loop.table[rank].stream if t.direct_streams else "",
                valid_kinds=self._valid_kinds, before_wait=self.hand_off, describe=self.describe,
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
                on_peer_lost=self._on_peer_lost,
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
            )
            self._thread = self._loop.start()
        if not self._loop.settled.wait(t.connect_timeout_s + _SETTLE_GRACE_S):
            self.close()
            raise ZgradTimeoutError(f"worker {self.name!r}: the mesh I/O thread did not finish start-up in time")
        if self._loop.error is not None:
            self.close()
            raise self._loop.error

    def leads(self) -> bool:
        """Whether the calling thread holds the I/O role now (it is running ``on_message``)."""
        loop = self._loop
        return loop is not None and loop.role.leads()

    def _wait_leading(self, sock: Any, timeout_s: float) -> bool | None:
        loop = self._loop
        return None if loop is None else loop.wait_as_leader(sock, timeout_s)

    def allow_takeover(self) -> None:
        """Called by ``on_message`` once what it must do in arrival order is done: from then on,
        if it runs past ``transport.inline_budget_ms`` (counted from its start), a standby thread
        takes the I/O role over and handles the next messages while it goes on, so what it does
        afterwards is not ordered with them. No-op outside ``on_message``. Thread-safe."""
        loop = self._loop
        if loop is not None:
            loop.role.allow_takeover()

    def hand_off(self) -> None:
        """Called by a thread about to block: if it is the I/O role's leader (running a handler),
        a standby takes the role now, so that inbound messages do not wait for it. Thread-safe."""
        loop = self._loop
        if loop is not None:
            loop.role.hand_off()

    def _release(self, sockets: MeshSockets) -> None:
        if self._direct is not None:
            self._direct.close(f"the mesh of worker {self.name!r} is closed")
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
        started = self._direct is not None and self._loop.table is not None
        views, meta_bytes, nbytes = self._checked(dst_rank, kind, meta, buffers, started)
        return fr.encode(kind, 0, request_id, meta_bytes, views, self._chunk_bytes), nbytes

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

    def request(self, dst_rank: int, kind: int, request_id: int, meta: Any, buffers: Sequence[Any],
                timeout_s: float) -> Envelope:
        """Send one request on the calling thread's own socket to ``dst_rank`` and wait there for
        its reply (caller-direct; see ``direct.py``). Blocks. Thread-safe.

        The callee answers with :meth:`reply`. Requests sent this way are not ordered with the
        messages of :meth:`send` (they travel on another connection).

        Args:
            dst_rank, kind, request_id, meta, buffers: as for :meth:`send`.
            timeout_s: longest wait for the reply; 0 waits as long as the peer lives.

        Returns:
            The reply, an :class:`Envelope` with the same ``request_id``.

        Raises:
            WorkerUnavailableError: ``dst_rank`` is (or, while waiting, was declared) lost.
            ZgradTimeoutError: no reply within ``timeout_s`` (a later reply is dropped and counted).
            TransportError: the mesh is not started or closed, or the message is over the cap.
        """
        frames, _ = self._frames(dst_rank, kind, request_id, meta, buffers)
        deadline_s = time.monotonic() + timeout_s if timeout_s > 0 else None
        return self._direct.request(dst_rank, request_id, frames, deadline_s)

    def send_direct(self, dst_rank: int, kind: int, request_id: int, meta: Any, buffers: Sequence[Any]) -> None:
        """Send one request on the calling thread's own socket to ``dst_rank`` without waiting
        for its answer, which the callee sends with :meth:`reply` and the thread collects with
        :meth:`wait_direct`. Not ordered with :meth:`send`. Raises as :meth:`request` does."""
        frames, _ = self._frames(dst_rank, kind, request_id, meta, buffers)
        self._direct.send(dst_rank, frames, self._config.transport.send_timeout_s)

    def wait_direct(self, expected: dict[int, set[int]], wake_fd: int | None, timeout_s: float) -> list[Envelope]:
        """Collect answers to :meth:`send_direct` requests (``expected``: rank -> request ids,
        updated) on the calling thread's sockets; returns once some arrived, ``wake_fd`` (if
        not None) is readable, or ``timeout_s`` (at most one wait slice) passed."""
        return self._direct.wait_replies(expected, wake_fd, timeout_s)

    def direct_open(self, dst_rank: int) -> bool:
        """Whether the calling thread's own socket to ``dst_rank`` is open (a reply to a
        :meth:`send_direct` request can still arrive there)."""
        return self._direct is not None and self._direct.has_socket(dst_rank)

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
        direct = self._direct
        if direct is not None:
            for key, value in (("direct_requests", direct.requests), ("late_replies", direct.late_replies)):
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
