"""The I/O loop of one mesh: the turns of the I/O role's leader (``role.py``).

Once the loop runs, the leader is the only thread that polls, reads, accepts, connects or closes
the mesh's sockets: the inbound ROUTER, the ZAP handler, the peers' DEALERs, the stream listener
and every stream connection. Other threads write, never read, and only where a lock makes the
write theirs for a moment: a stream link (``links/stream.py``, ``StreamLink.write``: its lock,
when nothing waits for that peer), the reply on a caller-direct stream connection (``stream_inbound.py``,
``StreamConnection.reply``: the connection's lock), the inproc wake-up socket (``outbox.py``: its
lock), and a handler that sends on the leader's sockets holds the role's lock (``role.py``). The
calling threads' own caller-direct sockets are theirs (``caller_sockets.py``), not the loop's.

Each turn polls, with a timeout and never spinning, the inbound ROUTER (which also carries the
wake-ups, see ``sockets.py``), the ZAP handler with CURVE, the stream listener and its
connections (``stream_inbound.py``: peers' links and caller-direct connections), and the
outbound links (DEALERs or streams, ``links/``) that have a backlog; it handles at most one
inbound message (the others one read from a stream completed wait for the next turns),
takes the outbox and sends, and does the liveness and start-up bookkeeping when it is due.

Split by job: this module has the turns, the start and the outbound side; reading, checking and
running inbound messages is ``inbound.py``'s; housekeeping, closing, loss and teardown are
``upkeep.py``'s (their methods are the loop's, so the turns call them as their own).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from zgrad.transport import frames as fr
from zgrad.transport.cma import CmaPeers
from zgrad.transport.cma_tickets import TicketTable
from zgrad.transport.envelope import Envelope, WorkerEntry
from zgrad.transport.link_replies import LinkReplies
from zgrad.transport.liveness import Liveness
from zgrad.transport.loop.inbound import Inbound, routing_id
from zgrad.transport.loop.links import PeerLinks
from zgrad.transport.loop.outbox import Outbox
from zgrad.transport.loop.role import IoRole
from zgrad.transport.loop.stream_inbound import StreamInbound
from zgrad.transport.loop.upkeep import MAX_POLL_MS, Upkeep
from zgrad.transport.pool import BufferPool
from zgrad.transport.rendezvous import Rendezvous
from zgrad.transport.security import CurveKeys, ZapHandler
from zgrad.transport.sockets import MeshSockets, send_frames
from zgrad.transport.stats import TransportStats
from zgrad.transport.streams import MAX_FRAMES

__all__ = ["IoLoop"]

_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)


class IoLoop(Inbound, Upkeep):
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
            wait_ms = 0 if loopback or outbox.has_queued() else max(0, min(MAX_POLL_MS, int((self._due_s - now_s) * 1000) + 1))
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
            if len(events) == 1 and events[0][0] == sock:
                return True
            # why the leader hands its role on (get_debug_info()["transport"]): its own reply was
            # late, or something else arrived, counted by where
            if not events:
                self._stats.add("leader_waits_timed_out")
            for ready, _ in events:
                if ready is not sock:
                    self._stats.add("leader_waits_interrupted_" + self._describe_interrupt(ready))
            return False
        finally:
            self.role.lock.release()

    def _describe_interrupt(self, ready: Any) -> str:
        if ready is self._sockets.inbound:
            return "by_inbound"
        return "by_zap" if ready is self._sockets.zap else "by_stream"

    def route(self, routing_id: bytes, frames: list) -> None:
        """Send ``frames`` on the inbound socket to the caller-direct socket ``routing_id``
        (a reply). Dropped, and counted, if that socket is gone or full: its caller has given up."""
        sock = self._sockets.inbound
        try:
            sock.send(routing_id, _MORE)
            send_frames(sock, frames, self._copy_buffers)
        except zmq.ZMQError:
            self._stats.add("dropped")
