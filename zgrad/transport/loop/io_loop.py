"""The I/O loop of one mesh: the turns of the I/O role's leader (``role.py``).

Once the loop runs, the leader is the only thread that polls, reads, accepts, connects or closes
the mesh's sockets: the inbound ROUTER, the ZAP handler, the peers' DEALERs, the stream listener
and every stream connection. Other threads write, never read, and only where a lock makes the
write theirs for a moment: a stream link (``links/stream.py``, ``StreamLink.write``: its lock, when
nothing waits for that peer), the reply on a caller-direct stream connection (``stream_inbound.py``,
``StreamConnection.reply``: the connection's lock), the inproc wake-up socket (``outbox.py``: its
lock), and a handler that sends on the leader's sockets holds the role's lock (``role.py``). The
calling threads' own caller-direct sockets are theirs (``caller_sockets.py``), not the loop's.

Each turn polls, with a timeout and never spinning, the inbound ROUTER (which also carries the
wake-ups, see ``sockets.py``), the ZAP handler with CURVE, the stream listener and its
connections (``stream_inbound.py``: peers' links and caller-direct connections), and the
outbound links (DEALERs or streams, ``links/``) that have a backlog; it handles at most one
inbound message (the others one read from a stream completed wait for the next turns),
takes the outbox and sends, and does the liveness and start-up bookkeeping when it is due.

Inbound checks, in order: peer (routing id names a rank of this job; with CURVE the key's rank
must be that rank; the peer is not lost; once the table is known the session must match), then
the frames (``frames.decode``), then control messages against the rendezvous state.

Closing: the I/O thread sends what is still queued, waits (bounded) until peers reported done
every buffer it offered them by ticket, then sends GOODBYE to every live peer, and runs
until each has answered GOODBYE_ACK, said goodbye itself, or been lost (bounded by the close
timeout). Each pair's messages arrive in order, so an answer means everything sent before it
has arrived; only then are the sockets closed (LINGER 0 loses nothing that mattered).
"""

from __future__ import annotations

import collections
import logging
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from zgrad.errors import TransportError
from zgrad.transport import frames as fr
from zgrad.transport.cma import CMA_KINDS, CmaPeers, TicketTable
from zgrad.transport.caller_sockets import DIRECT_ID, DIRECT_MAGIC
from zgrad.transport.envelope import Envelope, WorkerEntry
from zgrad.transport.link_replies import LinkReplies
from zgrad.transport.loop.links import PeerLinks
from zgrad.transport.liveness import Liveness
from zgrad.transport.loop.outbox import Outbox
from zgrad.transport.pool import BufferPool
from zgrad.transport.rendezvous import Rendezvous
from zgrad.transport.loop.role import IoRole
from zgrad.transport.security import CurveKeys, ZapHandler
from zgrad.transport.sockets import MeshSockets, send_frames
from zgrad.transport.stats import TransportStats
from zgrad.transport.loop.stream_inbound import StreamConnection, StreamInbound
from zgrad.transport.streams import MAX_FRAMES

__all__ = ["IoLoop", "ROUTING_ID", "routing_id"]

ROUTING_ID = struct.Struct("!4sIQ")
_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)
_ROUTING_MAGIC = b"zgid"
_MAX_POLL_MS = 1000
# How long rank 0 keeps running after aborting start-up, so that its ABORT messages leave.
_ABORT_GRACE_S = 0.5
_GOODBYE_KINDS = frozenset({fr.KIND_GOODBYE, fr.KIND_GOODBYE_ACK})
_AFTER_TABLE_KINDS = _GOODBYE_KINDS | CMA_KINDS


def routing_id(rank: int, session: int) -> bytes:
    """Return the routing id a worker's DEALERs announce: magic, rank, session."""
    return ROUTING_ID.pack(_ROUTING_MAGIC, rank, session)


class IoLoop:
    """Everything the I/O thread owns. Built by the mesh; :meth:`run` is the thread's target.

    Results for other threads: :attr:`table` (set once, then read-only), :attr:`error` and
    :attr:`settled` (set when start-up succeeded or failed, or the loop ended). Set
    :attr:`close_timeout_s` before closing the outbox to bound the goodbye exchange.
    """

    def __init__(
        self,
        *,
        sockets: MeshSockets,
        me: WorkerEntry,
        world_size: int,
        config: Any,
        copy_buffers: bool,
        keys: CurveKeys | None,
        valid_kinds: frozenset[int],
        on_message: Callable[[Envelope], None],
        on_peer_lost: Callable[[int, str], None],
        outbox: Outbox,
        stats: TransportStats,
        make_rendezvous: Callable[["IoLoop"], Rendezvous],
        release: Callable[[], None],
        logger: logging.Logger,
        tickets: TicketTable | None = None,
        defer_cma_reads: bool = False,
        on_thread_start: Callable[[], None] | None = None,
        max_in_handlers: int = 16,
        link_replies: LinkReplies | None = None,
    ):
        transport = config.transport
        self._defer_cma_reads = defer_cma_reads
        self._copy_buffers = copy_buffers  # a zero-copy frame would alias the sender's memory
        self._sockets = sockets
        self._me = me
        self._world_size = world_size
        self._transport = transport
        self._keys = keys
        self._valid_kinds = valid_kinds
        self._on_message = on_message
        self._link_replies = link_replies if link_replies is not None else LinkReplies(frozenset())
        self._on_peer_lost = on_peer_lost
        self._outbox = outbox
        self._stats = stats
        self._release = release
        self._log = logger
        self._max_bytes = transport.max_message_mb << 20
        self._chunk_bytes = transport.chunk_mb << 20
        self.pool = BufferPool(transport.recv_pool_mb << 20)
        self._liveness = Liveness(transport.heartbeat_interval_s, transport.heartbeat_timeout_s)
        self._poller = zmq.Poller()
        self._links = PeerLinks(
            sockets, self._poller, outbox, self._liveness, stats, transport, keys, copy_buffers,
            routing_id(me.rank, me.session), use_streams=transport.direct_streams,
        )
        self._dead: dict[int, str] = {}
        self._departed: set[int] = set()
        self._heartbeat = self._control_frames(fr.KIND_HEARTBEAT, None)
        self._zap = ZapHandler({k: r for r, k in keys.peers.items()}, self._on_auth_denied) if keys is not None else None
        self._rendezvous = make_rendezvous(self)
        self._cma = CmaPeers(self.send_control, tickets, me, stats, logger, wake=outbox.wake)
        self._stop_at_s: float | None = None
        self._due_s = 0.0
        self._housekept_s: float | None = None  # when housekeeping last ran
        self._awaiting_goodbye: set[int] | None = None
        self._tickets = tickets
        self._drain_until_s: float | None = None
        self.close_timeout_s = transport.heartbeat_timeout_s
        self.table: tuple[WorkerEntry, ...] | None = None
        self.error: BaseException | None = None
        self.settled = threading.Event()
        self.finished = threading.Event()
        # Messages ready to run, one per turn: sent to this worker itself, or read from a stream.
        self._loopback: collections.deque[Envelope] = collections.deque()
        self._streams: StreamInbound | None = None
        if sockets.stream_listener is not None:
            self._streams = StreamInbound(
                sockets.stream_listener, lambda fd: self._poller.register(fd, zmq.POLLIN), self._poller.unregister,
                stats, self._max_bytes + 8 * MAX_FRAMES, transport.connect_timeout_s, transport.send_timeout_s,
            )
        self.role = IoRole(f"zgrad-mesh-io-{me.name}", self.lead, transport.inline_budget_ms / 1000, max_in_handlers,
                           on_thread_start, on_leader=self._on_leader, logger=logger)

    def _on_leader(self, ident: int | None) -> None:
        self._outbox.io_thread_id = ident

    # -- Link (used by the rendezvous) ----------------------------------------------------

    def connect_peer(self, rank: int, endpoint: str, session: int | None, stream: str = "") -> None:
        self._links.open(rank, endpoint, stream)

    def send_control(self, rank: int, kind: int, meta: Any) -> None:
        self._links.send(rank, self._control_frames(kind, meta), accounted=False)

    def _control_frames(self, kind: int, meta: Any) -> list:
        return fr.encode(kind, 0, 0, fr.encode_meta(meta), (), self._chunk_bytes)

    # -- the loop ---------------------------------------------------------------------------

    def start(self) -> threading.Thread:
        """Start the I/O role's first thread (see ``role.py``); it runs :meth:`run`."""
        return self.role.start(self.run)

    def run(self) -> bool:
        """Start up, then lead (see :meth:`lead`). The first leader's task."""
        self._outbox.io_rank = self._me.rank
        self._outbox.send_now = self._send_now
        self._outbox.write_now = self._write_now
        self._poller.register(self._sockets.inbound, zmq.POLLIN)
        if self._sockets.zap is not None:
            self._poller.register(self._sockets.zap, zmq.POLLIN)
        try:
            self._rendezvous.begin()
            self.table = self._rendezvous.table  # a world of one has it at once
        except BaseException as exc:
            self._failed(exc)
            return True
        return self.lead()

    def lead(self) -> bool:
        """Run turns while the calling thread leads. Returns False when it handed the role on or
        was taken over; True when the loop is over (closed and said goodbye, or failed): then
        every socket is closed."""
        try:
            if not self._turns():
                return False
        except BaseException as exc:
            self._failed(exc)
            return True
        self._teardown()
        return True

    def _failed(self, exc: BaseException) -> None:
        try:
            self._log.exception("worker %r: the mesh I/O thread failed", self._me.name)
            self._fail_all(f"the mesh I/O thread of worker {self._me.name!r} failed: {exc!r}", exc)
        finally:
            self._teardown()

    def _turns(self) -> bool:
        sockets = self._sockets
        poll = self._poller.poll
        leads = self.role.leads
        loopback = self._loopback
        outbox = self._outbox
        links = self._links
        while True:
            now_s = time.monotonic()
            if now_s >= self._due_s:
                self._housekeeping(now_s)
                if self._stop_at_s is not None and now_s >= self._stop_at_s:
                    return True
            wait_ms = 0 if loopback or outbox.has_queued() else max(0, min(_MAX_POLL_MS, int((self._due_s - now_s) * 1000) + 1))
            if wait_ms:
                outbox.leader_idle = True  # while it sleeps, other threads write links themselves
                try:
                    events = poll(wait_ms)
                finally:
                    outbox.leader_idle = False
            else:
                events = poll(0)
            woken = False
            for sock, event in events:
                if sock is sockets.inbound:
                    woken = self._receive()
                    if not leads():
                        return False
                elif sock is sockets.zap:
                    self._zap.handle(sock)
                elif type(sock) is int:
                    if not links.on_writable(sock):
                        self._on_stream(sock)
                elif event & zmq.POLLOUT:
                    links.on_writable(sock)
            if woken or outbox.has_queued():
                for item in outbox.take_all(woken):
                    self._send(*item)
            if links.backlogged:
                links.poll_backlogged()
            if loopback:
                item = loopback.popleft()
                if type(item) is Envelope:
                    self._deliver(item)
                else:
                    self._on_link_message(*item)
                if not leads():
                    return False
            if self._cma.dirty:
                done_due_s = self._cma.flush()
                if done_due_s is not None and done_due_s < self._due_s:
                    self._due_s = done_due_s
            if self._outbox.closed:
                aborting = self._stop_at_s is not None  # let the ABORT messages leave first
                if self._awaiting_goodbye is None and not aborting and self._tickets_returned(now_s) \
                        and not self._begin_goodbye():
                    return True
                if self._awaiting_goodbye is not None and not self._awaiting_goodbye:
                    return True

    def _tickets_returned(self, now_s: float) -> bool:
        """Closing: whether every buffer this worker offered by ticket was reported done, so that
        its memory may go (a peer that defers its reads may still be reading it). Waits at most
        half the close timeout, then goes on (the rest is for the goodbye)."""
        tickets = self._tickets
        if tickets is None or tickets.open_count == 0 or self.table is None:
            return True
        if self._drain_until_s is None:
            self._drain_until_s = now_s + self.close_timeout_s / 2
            self._due_s = min(self._due_s, self._drain_until_s)
        return now_s >= self._drain_until_s

    def _begin_goodbye(self) -> bool:
        """Start the goodbye exchange; False if there is nobody to say it to (not started)."""
        if self.table is None:
            return False
        # The outbox refuses new messages now; what it still holds was sent before close().
        for item in self._outbox.take_all(woken=False):
            self._send(*item)
        live = {r for r in range(self._world_size) if r != self._me.rank and r not in self._dead}
        for rank in live:
            self.send_control(rank, fr.KIND_GOODBYE, None)
        self._awaiting_goodbye = live
        self._stop_at_s = time.monotonic() + self.close_timeout_s
        self._due_s = 0.0
        return True

    def _housekeeping(self, now_s: float) -> None:
        """Heartbeats, silence, handshake failures, start-up progress; then set when it is due again."""
        # Housekeeping comes round at least every _MAX_POLL_MS in a loop that runs: a longer gap
        # is time this worker was not listening (what its peers sent meanwhile is still unread),
        # so their silence is judged as it stood at the last housekeeping.
        expected_s = _MAX_POLL_MS / 1000 + self._transport.heartbeat_interval_s
        if self._housekept_s is not None and now_s - self._housekept_s > expected_s:
            self._liveness.stalled(now_s - self._housekept_s)
        self._housekept_s = now_s
        for rank in self._liveness.heartbeats_due(now_s):
            self._links.send(rank, self._heartbeat, accounted=False)
            # Due again in an interval even if it waits behind a backlog or its link failed
            # (else every turn would find it due: a busy loop).
            self._liveness.sent_to(rank, now_s)
            self._stats.add("heartbeats_out")
        silent = self._liveness.silent(now_s)
        if silent:
            # Messages still queued in our socket may be from these peers: only declare them
            # lost once the socket is empty, or when they are silent for twice the timeout.
            backlog = self._sockets.inbound.get(zmq.EVENTS) & zmq.POLLIN or self._loopback
            limit_s = self._transport.heartbeat_timeout_s
            for rank, silent_s in silent:
                if not backlog or silent_s > 2 * limit_s:
                    self._lose(rank, f"no message for {silent_s:.1f} s (transport.heartbeat_timeout_s = {limit_s})")
        self._drain_monitor()
        if self._streams is not None and self._streams.connections:
            self._streams.expire(now_s)
        if not self.settled.is_set():
            rv = self._rendezvous
            rv.check_deadline(now_s)
            if rv.error is not None:
                self.error = rv.error
                self.settled.set()
                self._stop_at_s = now_s + _ABORT_GRACE_S
            elif rv.ready and self._cma.settled(give_up=now_s >= rv.deadline_s):
                self.settled.set()
        due = [self._liveness.next_due_s(), self._stop_at_s, now_s + _MAX_POLL_MS / 1000]
        if not self.settled.is_set():
            due.append(self._rendezvous.deadline_s)
        self._due_s = min(d for d in due if d is not None)

    # -- inbound ----------------------------------------------------------------------------

    def _receive(self) -> bool:
        """Receive one message; return whether it was a wake-up."""
        recv = self._sockets.inbound.recv
        try:
            frame = recv(zmq.NOBLOCK, copy=False)
        except zmq.Again:  # readiness can be stale; nothing lost
            return False
        parts = [frame]
        while frame.more:  # the rest of a multipart message is already here (atomic delivery)
            frame = recv(zmq.NOBLOCK, copy=False)
            parts.append(frame)
        ident = parts[0].bytes
        if len(parts) == 2 and ident == self._sockets.wake_id:
            return True
        self._on_inbound(parts, ident)
        return False

    def _on_inbound(self, parts: list, ident: bytes) -> None:
        rank = None
        try:
            rank, session, reply_to = self._identify(parts, ident)
            self._accept(rank, session, reply_to, parts[1:])
        except fr.Rejected as rejected:
            self._stats.reject("an unknown peer" if rank is None else f"rank {rank}", rejected.reason, rejected.detail)

    def _on_link_message(self, connection: StreamConnection, parts: list) -> None:
        """A message read from a peer's stream link, in its turn: as if it came from its DEALER
        (a bad one is dropped alone, as there: the stream itself was well formed)."""
        try:
            self._accept(connection.rank, connection.session, None, parts)
        except fr.Rejected as rejected:
            self._stats.reject(f"rank {connection.rank}", rejected.reason, rejected.detail)

    def _accept(self, rank: int, session: int, reply_to: Any, frames: list) -> None:
        """Decode and handle one message of an identified peer: control here, the layer's to
        ``on_message``.

        Raises:
            Rejected: the frames are malformed, the peer is lost, or the message is out of place.
        """
        kind, flags, request_id, meta, buffers = fr.decode(
            frames, valid_kinds=self._valid_kinds, max_message_bytes=self._max_bytes, take_buffer=self.pool.take,
            remote=self._cma.readers.get(rank), defer_remote=self._defer_cma_reads,
        )
        if rank in self._dead:
            if rank in self._departed and kind in _GOODBYE_KINDS:
                return  # the other half of a simultaneous goodbye
            raise fr.Rejected("dead_peer", f"rank {rank} was declared lost: {self._dead[rank]}")
        if kind in fr.RESERVED_KINDS:
            self._on_control(rank, session, kind, meta)
        elif self.table is None:
            raise fr.Rejected("not_ready", f"message kind {kind:#x} before this worker has the worker table")
        else:
            self._deliver(self._arrived(rank, kind, flags, request_id, meta, buffers, reply_to))
            return
        self._liveness.heard_from(rank, time.monotonic())

    def _arrived(self, rank: int, kind: int, flags: int, request_id: int, meta: Any, buffers: tuple,
                 reply_to: Any) -> Envelope:
        """Count a checked message of the layer above and make its envelope."""
        nbytes = 0
        for buffer in buffers:
            nbytes += buffer.nbytes
        self._stats.add_message("messages_in", "bytes_in", nbytes)
        if rank != self._me.rank:
            self._liveness.heard_from(rank, time.monotonic())
        return Envelope(rank, kind, flags, request_id, meta, buffers, self._keys is not None, reply_to)

    def _on_stream(self, fd: int) -> None:
        """A stream socket is readable: take new connections, or read one and queue its complete
        messages to run (the hello first: it binds the connection to a rank, checked like a
        routing id, and says whether it is the peer's link or a caller-direct connection). A
        link's messages are checked in their turn, as a DEALER's; on a caller-direct connection
        anything malformed closes it (a caller waits for its reply, which will not come)."""
        streams = self._streams
        if fd == streams.listen_fd:
            streams.accept()
            return
        connection, messages = streams.receive(fd)
        for parts in messages:
            try:
                if connection.rank is None:
                    self._on_hello(connection, parts)
                    continue
                if connection.link:
                    self._loopback.append((connection, parts))
                    continue
                rank = connection.rank
                if rank in self._dead:
                    raise fr.Rejected("dead_peer", f"rank {rank} was declared lost: {self._dead[rank]}")
                kind, flags, request_id, meta, buffers = fr.decode(
                    parts, valid_kinds=self._valid_kinds, max_message_bytes=self._max_bytes, take_buffer=self.pool.take,
                )
                if kind in fr.RESERVED_KINDS:
                    raise fr.Rejected("bad_control", f"control message kind {kind:#x} on a stream connection")
                self._loopback.append(self._arrived(rank, kind, flags, request_id, meta, buffers, connection))
            except fr.Rejected as rejected:
                streams.reject(connection, rejected)
                return

    def _on_hello(self, connection: StreamConnection, parts: list) -> None:
        ident = bytes(parts[0]) if len(parts) == 1 else b""
        if len(ident) not in (DIRECT_ID.size, ROUTING_ID.size):
            raise fr.Rejected("unknown_peer", f"stream hello {ident[:24].hex()} is not a zgrad worker's")
        rank, session, reply_to = self._identify(parts, ident)
        if rank in self._dead:
            raise fr.Rejected("dead_peer", f"rank {rank} was declared lost: {self._dead[rank]}")
        link = reply_to is None
        if link and any(c.link and c.rank == rank for c in self._streams.connections.values()):
            raise fr.Rejected("unknown_peer", f"a second link from rank {rank} (a stale process, or another one claiming its rank?)")
        connection.rank, connection.session, connection.link = rank, session, link
        if link:
            self._stats.add("stream_links")

    def _on_control(self, rank: int, session: int, kind: int, meta: Any) -> None:
        if kind == fr.KIND_HEARTBEAT:
            self._stats.add("heartbeats_in")
            return
        if kind in _AFTER_TABLE_KINDS and self.table is None:
            raise fr.Rejected("bad_control", f"message kind {kind:#x} before the worker table")
        if kind in CMA_KINDS:
            self._cma.on_control(rank, session, kind, meta)
            if not self.settled.is_set():
                self._due_s = 0.0  # look at start-up progress in this turn
            return
        if kind == fr.KIND_GOODBYE:
            self.send_control(rank, fr.KIND_GOODBYE_ACK, None)
            self._departed.add(rank)
            self._lose(rank, "it closed its mesh (shut down)", close_link=False)
        elif kind == fr.KIND_GOODBYE_ACK:
            if self._awaiting_goodbye is not None:
                self._awaiting_goodbye.discard(rank)
        else:
            self._rendezvous.on_control(rank, session, kind, meta)
            if self.table is None and self._rendezvous.table is not None:
                self.table = self._rendezvous.table
            if kind == fr.KIND_HELLO_ACK:
                self._cma.on_hello_ack(rank)
            self._due_s = 0.0  # look at start-up progress in this turn
        self._stats.add("control_in")

    def _identify(self, parts: list, ident: bytes) -> tuple[int, int, bytes | None]:
        """The sender's rank, session, and the routing id to answer on (a caller-direct socket's) or
        None; ``ident`` is the routing-id frame's bytes."""
        reply_to = None
        if len(ident) == ROUTING_ID.size and ident.startswith(_ROUTING_MAGIC):
            _, rank, session = ROUTING_ID.unpack(ident)
        elif len(ident) == DIRECT_ID.size and ident.startswith(DIRECT_MAGIC):
            _, rank, session, _ = DIRECT_ID.unpack(ident)
            reply_to = ident
        else:
            raise fr.Rejected("unknown_peer", f"routing id {ident[:24].hex()} is not a zgrad worker's")
        if rank >= self._world_size or (rank == self._me.rank and reply_to is None):
            raise fr.Rejected("unknown_peer", f"routing id claims rank {rank}; peers are ranks 0..{self._world_size - 1} but {self._me.rank}")
        if self._keys is not None:
            try:
                user_id = parts[0].get("User-Id")
            except zmq.ZMQError:
                user_id = None
            if user_id != str(rank):
                raise fr.Rejected("unauthenticated", f"routing id claims rank {rank} but the CURVE key is rank {user_id}'s")
        if self.table is not None and self.table[rank].session != session:
            raise fr.Rejected("unknown_peer", f"rank {rank} session {session:#x} is not the one in the worker table (a stale process?)")
        if reply_to is not None and self.table is None:
            raise fr.Rejected("not_ready", "a caller-direct message before this worker has the worker table")
        return rank, session, reply_to

    def _deliver(self, envelope: Envelope) -> None:
        """Run ``on_message`` on this thread, the leader, which may be taken over meanwhile:
        afterwards, the caller leaves the loop unless ``role.leads()``. A reply awaited by a
        thread of this worker (``link_replies.py``) goes to that thread instead."""
        replies = self._link_replies
        if envelope.kind in replies.kinds and envelope.reply_to is None and replies.deliver(envelope):
            return  # the reply to a request that went over the link: its thread waits for it
        role = self.role
        role.begin_handler(time.monotonic())
        try:
            self._on_message(envelope)
        except Exception as exc:
            self._stats.add("callback_errors")
            self._log.error("worker %r: on_message raised %r for kind %#x from rank %d", self._me.name, exc, envelope.kind, envelope.src, exc_info=True)
        finally:
            role.end_handler()

    def _drain_monitor(self) -> None:
        while True:
            try:
                event = recv_monitor_message(self._sockets.monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            self._stats.add("handshake_failed")
            endpoint = event["endpoint"].decode(errors="replace")
            self._stats.warn_once("a client", "handshake_failed", f"event {int(event['event']):#x} on {endpoint}; connection dropped")

    def _on_auth_denied(self, address: str, detail: str) -> None:
        self._stats.add("auth_denied")
        self._stats.warn_once(f"client {address}", "auth_denied", f"{detail}; connection refused")

    # -- outbound -----------------------------------------------------------------------------

    def _send(self, dst: int, frames: list, nbytes: int, route: bytes | None = None, accounted: bool = True) -> None:
        """Send one message (to a peer, or delivered here if ``dst`` is us). ``route``: the
        routing id of the caller-direct socket of ``dst`` it answers, sent on the inbound socket.
        ``accounted``: it came through the outbox queue, which is told when it leaves."""
        self._stats.add_message("messages_out", "bytes_out", nbytes)
        if route is not None:
            self.route(route, frames)
            if accounted:
                self._outbox.handed_over(dst)
        elif dst == self._me.rank:
            if accounted:
                self._outbox.handed_over(dst)
            kind, flags, request_id, meta, buffers = fr.decode(
                frames, valid_kinds=self._valid_kinds, max_message_bytes=self._max_bytes,
                take_buffer=self.pool.take, copy_single=True,
            )
            self._stats.add("loopback")
            self._stats.add_message("messages_in", "bytes_in", nbytes)
            # Delivered by the turn loop, which leaves it if the handler cost this thread the role.
            self._loopback.append(Envelope(dst, kind, flags, request_id, meta, buffers, True))
        elif not self._links.send(dst, frames, accounted=accounted):  # lost since it was queued
            self._stats.add("dropped")
            if accounted:
                self._outbox.handed_over(dst)

    def _send_now(self, dst: int, item: tuple) -> bool:
        """A message the leader sends from a handler: after what the queue already holds. Under
        the role's lock, so that it is not taken over meanwhile; False if it no longer leads."""
        if not self.role.acquire_if_leader():
            return False
        try:
            if self._outbox.has_queued():
                for queued in self._outbox.take_all(woken=False):
                    self._send(*queued)
            _, frames, nbytes, route = item
            self._send(dst, frames, nbytes, route, accounted=False)
        finally:
            self.role.lock.release()
        return True

    def _write_now(self, dst: int, item: tuple) -> bool:
        """A message another thread writes on the link itself, if nothing waits before it
        (``Link.write``); False: it takes the outbox."""
        _, frames, nbytes, route = item
        return route is None and self._links.write(dst, frames, nbytes)

    def link_thread_writes(self) -> tuple[int, int]:
        """Messages (and buffer bytes) other threads wrote on stream links themselves. Thread-safe."""
        return self._links.thread_writes()

    def reply_now(self, dst: int, routing_id: bytes, frames: list, nbytes: int) -> bool:
        """Send a reply to the caller-direct socket ``routing_id`` of ``dst`` at once, if the
        calling thread leads (under the role's lock, so that it is not taken over meanwhile);
        False if it does not. It skips the outbox: it is not ordered with the link's messages,
        as it goes to another socket of the peer."""
        if not self.role.acquire_if_leader():
            return False
        try:
            self._stats.add_message("messages_out", "bytes_out", nbytes)
            self.route(routing_id, frames)
        finally:
            self.role.lock.release()
        return True

    def wait_as_leader(self, sock: Any, timeout_s: float) -> bool | None:
        """The calling thread is about to wait for a reply on its own socket ``sock`` (a ZeroMQ
        socket or a stream's file descriptor): if it leads, wait there without giving up the role
        while nothing arrives on the inbound, ZAP or stream sockets, at most ``timeout_s``. True:
        the reply is there and the thread still leads (it answers its own caller itself, no
        hand-off either way); False: something arrived or time is up, so it must hand the role on
        before it waits longer; None: it does not lead.

        The role's lock is held meanwhile, so a take-over waits for the end of this wait."""
        if not self.role.acquire_if_leader():
            return None
        try:
            if self._loopback:
                return False  # messages read from a stream wait for a leader
            items = [(sock, zmq.POLLIN), (self._sockets.inbound, zmq.POLLIN)]
            if self._sockets.zap is not None:
                items.append((self._sockets.zap, zmq.POLLIN))
            if self._streams is not None:
                items.extend((fd, zmq.POLLIN) for fd in self._streams.poll_fds())
            events = zmq.zmq_poll(items, max(1, int(timeout_s * 1000)))
            return len(events) == 1 and events[0][0] == sock
        finally:
            self.role.lock.release()

    def route(self, routing_id: bytes, frames: list) -> None:
        """Send ``frames`` on the inbound socket to the caller-direct socket ``routing_id``
        (a reply). Dropped, and counted, if that socket is gone or full: its caller has given up."""
        sock = self._sockets.inbound
        try:
            sock.send(routing_id, _MORE)
            send_frames(sock, frames, self._copy_buffers)
        except zmq.ZMQError:
            self._stats.add("dropped")

    # -- loss and shutdown ----------------------------------------------------------------------

    def _lose(self, rank: int, reason: str, close_link: bool = True) -> None:
        if rank in self._dead:
            return
        self._dead[rank] = reason
        self._liveness.lose(rank)
        self._outbox.mark_dead(rank, reason)
        self._cma.lost(rank)  # after mark_dead: no ticket for it can be issued and sent later
        self._stats.add("dropped", self._links.drop(rank, close=close_link))
        if self._streams is not None:
            self._streams.drop_rank(rank)
        if self._awaiting_goodbye is not None:
            self._awaiting_goodbye.discard(rank)
        self._stats.add("peers_lost")
        name = self.table[rank].name if self.table is not None else f"rank {rank}"
        log = self._log.info if not close_link else self._log.warning
        log("worker %r: lost peer %r (rank %d): %s", self._me.name, name, rank, reason)
        try:
            self._on_peer_lost(rank, reason)
        except Exception:
            self._log.exception("worker %r: on_peer_lost raised for rank %d", self._me.name, rank)

    def _fail_all(self, reason: str, exc: BaseException) -> None:
        self._outbox.close(reason)
        if not self.settled.is_set():
            self.error = exc
            self.settled.set()
        if self.table is not None:
            for rank in range(self._world_size):
                if rank != self._me.rank:
                    self._lose(rank, reason)

    def _teardown(self) -> None:
        self._outbox.close(f"the mesh of worker {self._me.name!r} is closed")
        self._outbox.detach()
        if not self.settled.is_set():
            self.error = self.error or TransportError(f"the mesh of worker {self._me.name!r} was closed during start-up")
            self.settled.set()
        if self._streams is not None:
            self._streams.close_all()
        self._links.close_all()
        self._sockets.close()
        self._cma.close()
        self.pool.clear()
        self._release()
        self.finished.set()
