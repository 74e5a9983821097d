"""The outbound side of the I/O thread: one link per peer and the messages queued in front of it.

A link is a ZeroMQ DEALER, or, when CURVE is off and the peer announced a stream socket
(``streams.py``), a plain stream connection: then a message costs one write system call and one
wake-up of the peer's leader, where ZeroMQ adds a wake-up of its own I/O thread on each side.
Either way one link carries every message of the pair, so they arrive in the order sent.

A message goes out at once when nothing is queued before it for that peer; otherwise (the
DEALER's high-water mark is reached, the kernel has no room for the stream's bytes, or the
connection is still being made) it waits here, in order, and the socket is polled for POLLOUT
until it drains. Nothing here blocks. Used by the I/O thread, except :meth:`PeerLinks.write`.

Any thread may write a stream link itself (:meth:`PeerLinks.write`; the outbox offers it while
the I/O thread sleeps) when nothing waits for that peer, neither here nor in the outbox: the
message then leaves without waking the I/O thread. Each
stream link has a lock, held by whoever writes its socket or touches its queue (taken before the
outbox's lock); what the kernel does not take of such a write waits in the link's queue, and the
I/O thread, woken once, polls for room as for its own writes.

A stream link that fails (the peer closed or reset it) drops what is queued and what is sent
to it later, counted as dropped; the peer is then declared lost by its silence, as over ZeroMQ.
"""

from __future__ import annotations

import collections
import logging
import socket
import threading
import time
from typing import Any

import zmq

from zgrad.config import TransportConfig
from zgrad.transport.frames import Rejected
from zgrad.transport.liveness import Liveness
from zgrad.transport.loop.outbox import Outbox
from zgrad.transport.security import CurveKeys
from zgrad.transport.stats import TransportStats
from zgrad.transport.sockets import MeshSockets, open_dealer, send_frames
from zgrad.transport.streams import connect_nonblocking, encode_message, write_some

__all__ = ["PeerLinks"]

_log = logging.getLogger("zgrad.transport")


class _StreamLink:
    """A link on a stream connection: the socket and the messages (encoded pieces, bytes left,
    whether the outbox counts it) that wait for room, the first maybe partly written; the lock
    held by whoever writes the socket or touches ``pending``; the messages and buffer bytes that
    threads other than the I/O thread wrote themselves."""

    __slots__ = ("sock", "fd", "pending", "failed", "closed", "lock", "thread_writes", "thread_bytes")

    def __init__(self, sock: socket.socket, hello: bytes) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.pending: collections.deque = collections.deque([(*encode_message([hello]), False)])
        self.failed: str | None = None
        self.closed = False
        self.lock = threading.Lock()
        self.thread_writes = 0
        self.thread_bytes = 0


class PeerLinks:
    """Outbound links of one worker, by peer rank.

    Args:
        sockets: the mesh's sockets (the DEALERs live in ``sockets.dealers``).
        poller: the I/O thread's poller (a link with a backlog is registered for POLLOUT).
        outbox: told when messages that came through it leave.
        liveness: told when something was sent to a peer.
        stats: counts what a failed stream link drops.
        copy_buffers: copy every frame on send (the transport shares memory between workers).
        routing_id: this worker's routing id, announced on every link (a stream link's hello).
        use_streams: dial a peer's stream socket where it announced one (CURVE off).
    """

    def __init__(
        self,
        sockets: MeshSockets,
        poller: zmq.Poller,
        outbox: Outbox,
        liveness: Liveness,
        stats: TransportStats,
        config: TransportConfig,
        keys: CurveKeys | None,
        copy_buffers: bool,
        routing_id: bytes,
        use_streams: bool = False,
    ):
        self._sockets = sockets
        self._poller = poller
        self._outbox = outbox
        self._liveness = liveness
        self._stats = stats
        self._config = config
        self._keys = keys
        self._copy = copy_buffers
        self._routing_id = routing_id
        self._use_streams = use_streams and keys is None
        self._queues: dict[int, collections.deque] = {}
        self._blocked: dict[zmq.Socket, int] = {}
        self._streams: dict[int, _StreamLink] = {}
        self._stream_fds: dict[int, int] = {}  # fd -> rank, of the stream links polled for POLLOUT
        self.backlogged: list[int] = []  # ranks whose link a thread left a backlog on (to poll)
        self._closed_writes = [0, 0]  # thread_writes() of the links closed so far

    def open(self, rank: int, endpoint: str, stream: str = "") -> None:
        """Dial ``rank``: at its stream socket ``stream`` when there is one (and streams are
        used), else at its ZeroMQ ``endpoint``; nothing if already dialled. A rank already dialled
        over ZeroMQ moves to its stream once that is known (rank 0's, learnt from the table), as
        long as nothing waits in front of its DEALER: the messages sent there before (REGISTER,
        heartbeats) were answered or do not need an order.

        Raises:
            Rejected: the endpoint (which came from a peer) cannot be dialled.
        """
        if rank in self._streams:
            return
        if stream and self._use_streams and not self._queues.get(rank):
            try:
                sock = connect_nonblocking(stream)
            except (OSError, ValueError) as exc:
                _log.warning("cannot dial the stream socket %s of rank %d (%s); its link uses ZeroMQ", stream, rank, exc)
            else:
                link = _StreamLink(sock, self._routing_id)
                with link.lock:
                    self._streams[rank] = link
                    self._flush_stream(rank, link)
                return
        if rank in self._queues:
            return
        try:
            peer_key = self._keys.peers[rank] if self._keys is not None else None
            sock = open_dealer(self._sockets.context, endpoint, self._routing_id, self._config, self._keys, peer_key)
        except Exception as exc:  # a bad endpoint string from a peer must not end the loop
            raise Rejected("bad_control", f"cannot dial endpoint {endpoint!r} of rank {rank}: {exc}") from None
        self._sockets.dealers[rank] = sock
        self._queues[rank] = collections.deque()

    def send(self, dst: int, frames: list, accounted: bool) -> bool:
        """Send one message to ``dst`` or queue it behind earlier ones; False if there is no link
        (or its stream failed).

        ``accounted``: the message came through the outbox (which is told when it leaves).
        """
        link = self._streams.get(dst)
        if link is not None:
            with link.lock:
                if link.failed is not None:
                    return False
                link.pending.append((*encode_message(frames), accounted))
                if len(link.pending) == 1:
                    self._flush_stream(dst, link)
            return True
        queue = self._queues.get(dst)
        if queue is None:
            return False
        queue.append((frames, accounted))
        if len(queue) == 1:
            self.flush(dst)
        return True

    def flush(self, dst: int) -> None:
        """Hand queued messages for ``dst`` to ZeroMQ until its high-water mark is reached."""
        queue = self._queues[dst]
        sock = self._sockets.dealers[dst]
        moved = accounted_moved = 0
        while queue:
            frames, accounted = queue[0]
            try:
                send_frames(sock, frames, self._copy)
            except zmq.Again:
                if sock not in self._blocked:
                    self._blocked[sock] = dst
                    self._poller.register(sock, zmq.POLLOUT)
                break
            queue.popleft()
            moved += 1
            accounted_moved += accounted
        if not queue and sock in self._blocked:
            del self._blocked[sock]
            self._poller.unregister(sock)
        self._moved(dst, moved, accounted_moved)

    def write(self, dst: int, frames: list, nbytes: int) -> bool:
        """Write one message to ``dst``'s stream link from the calling thread, any thread, if
        nothing waits for ``dst`` (here or in the outbox): True if it was written or its rest
        waits in the link's queue (the I/O thread is woken to poll for room); False if it must
        take the outbox (no stream link, a backlog, a failed link). ``nbytes``: its buffer bytes.

        Raises:
            WorkerUnavailableError, TransportError: as :meth:`Outbox.check`.
        """
        link = self._streams.get(dst)
        if link is None:
            return False
        with link.lock:
            if link.pending or link.failed is not None or link.closed or not self._outbox.nothing_waiting(dst):
                return False
            pieces, total = encode_message(frames)
            try:
                pieces, total = write_some(link.sock, pieces, total)
            except OSError:
                pass  # left to the I/O thread, whose own write fails the link (and counts the drop)
            else:
                link.thread_writes += 1
                link.thread_bytes += nbytes
            if total:
                link.pending.append((pieces, total, False))
                self.backlogged.append(dst)
        self._liveness.sent_to(dst, time.monotonic())
        if total:
            self._outbox.wake()
        return True

    def poll_backlogged(self) -> None:
        """Flush (and poll for room) the links that threads left a backlog on (I/O thread)."""
        while self.backlogged:
            dst = self.backlogged.pop()
            link = self._streams.get(dst)
            if link is not None:
                with link.lock:
                    if not link.closed:
                        self._flush_stream(dst, link)

    def thread_writes(self) -> tuple[int, int]:
        """Messages, and their buffer bytes, that other threads wrote to stream links themselves."""
        links = list(self._streams.values())
        return (self._closed_writes[0] + sum(link.thread_writes for link in links),
                self._closed_writes[1] + sum(link.thread_bytes for link in links))

    def _flush_stream(self, dst: int, link: _StreamLink) -> None:
        """Write what waits for ``dst`` until the kernel takes no more; poll for room if some is
        left. Under ``link.lock``."""
        pending = link.pending
        moved = accounted_moved = 0
        try:
            while pending:
                pieces, total, accounted = pending[0]
                pieces, total = write_some(link.sock, pieces, total)
                if total:
                    pending[0] = (pieces, total, accounted)
                    break
                pending.popleft()
                moved += 1
                accounted_moved += accounted
        except OSError as exc:
            self._fail_stream(dst, link, f"its stream link failed: {exc}")
        else:
            polled = link.fd in self._stream_fds
            if pending and not polled:
                self._stream_fds[link.fd] = dst
                self._poller.register(link.fd, zmq.POLLOUT)
            elif polled and not pending:
                del self._stream_fds[link.fd]
                self._poller.unregister(link.fd)
        self._moved(dst, moved, accounted_moved)

    def _moved(self, dst: int, moved: int, accounted_moved: int) -> None:
        if accounted_moved:
            self._outbox.handed_over(dst, accounted_moved)
        if moved:
            self._liveness.sent_to(dst, time.monotonic())

    def _fail_stream(self, dst: int, link: _StreamLink, reason: str) -> None:
        """Stop using a stream link: what waits is dropped (counted), later sends are refused.
        Under ``link.lock``."""
        if link.failed is None:  # info: a peer that closed after saying goodbye ends here too
            _log.info("link to rank %d: %s; messages to it are dropped until it is declared lost", dst, reason)
        link.failed = reason
        dropped = len(link.pending)
        self._forget_queued(dst, link.pending, 2)
        if dropped:
            self._stats.add("dropped", dropped)
        if self._stream_fds.pop(link.fd, None) is not None:
            self._poller.unregister(link.fd)

    def _forget_queued(self, dst: int, queue: collections.deque, accounted_at: int) -> int:
        """Empty ``queue`` (messages waiting for ``dst``, whose item ``accounted_at`` says whether
        the outbox counts it); tell the outbox, and return how many it counted."""
        accounted = sum(item[accounted_at] for item in queue)
        queue.clear()
        if accounted:
            self._outbox.handed_over(dst, accounted)
        return accounted

    def owns(self, fd: int) -> bool:
        """Whether ``fd`` is a stream link waiting for room (polled for POLLOUT)."""
        return fd in self._stream_fds

    def on_writable(self, sock: Any) -> None:
        """Continue flushing the peer whose DEALER or stream link became writable (or failed)."""
        if type(sock) is int:
            dst = self._stream_fds.get(sock)
            if dst is not None:
                link = self._streams[dst]
                with link.lock:
                    self._flush_stream(dst, link)
            return
        dst = self._blocked.get(sock)
        if dst is not None:
            self.flush(dst)

    def drop(self, rank: int, close: bool) -> int:
        """Forget what is queued for ``rank`` (returns how many outbox messages that was).

        ``close``: also close its link now; otherwise it stays open until teardown, so that what
        was already handed to it (a goodbye acknowledgement) can still leave: a stream link then
        refuses new messages but goes on writing those that wait.
        """
        dropped = 0
        link = self._streams.get(rank)
        if link is not None:
            with link.lock:
                if close:
                    dropped = self._forget_queued(rank, link.pending, 2)
                    self._close_stream(rank)
                elif link.failed is None:
                    link.failed = "the peer was declared lost"
        dropped += self._forget_queued(rank, self._queues.pop(rank, collections.deque()), 1)
        sock = self._sockets.dealers.get(rank)
        if sock is not None and sock in self._blocked:
            del self._blocked[sock]
            self._poller.unregister(sock)
        if sock is not None and close:
            del self._sockets.dealers[rank]
            sock.close(linger=0)
        return dropped

    def _close_stream(self, rank: int) -> None:
        """Under the link's lock (so that no thread writes a closed, maybe reused, descriptor)."""
        link = self._streams[rank]
        link.closed = True
        if self._stream_fds.pop(link.fd, None) is not None:
            self._poller.unregister(link.fd)
        link.sock.close()
        self._closed_writes[0] += link.thread_writes
        self._closed_writes[1] += link.thread_bytes
        del self._streams[rank]

    def close_streams(self) -> None:
        """Close every stream link (teardown; what the kernel holds still reaches the peer)."""
        for rank, link in list(self._streams.items()):
            with link.lock:
                self._close_stream(rank)
