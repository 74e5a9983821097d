"""The outbound side of the I/O thread: one link per peer and the messages queued in front of it.

A link is a ZeroMQ DEALER, or, when CURVE is off and the peer announced a stream socket
(``streams.py``), a plain stream connection: then a message costs one write system call and one
wake-up of the peer's leader, where ZeroMQ adds a wake-up of its own I/O thread on each side.
Either way one link carries every message of the pair, so they arrive in the order sent.

A message goes out at once when nothing is queued before it for that peer; otherwise (the
DEALER's high-water mark is reached, the kernel has no room for the stream's bytes, or the
connection is still being made) it waits here, in order, and the socket is polled for POLLOUT
until it drains. Nothing here blocks. Used by the I/O thread only.

A stream link that fails (the peer closed or reset it) drops what is queued and what is sent
to it later, counted as dropped; the peer is then declared lost by its silence, as over ZeroMQ.
"""

from __future__ import annotations

import collections
import logging
import socket
import time
from typing import Any

import zmq

from zgrad.config import TransportConfig
from zgrad.transport.frames import Rejected
from zgrad.transport.liveness import Liveness
from zgrad.transport.outbox import Outbox
from zgrad.transport.security import CurveKeys
from zgrad.transport.stats import TransportStats
from zgrad.transport.sockets import MeshSockets, open_dealer, send_frames
from zgrad.transport.streams import connect_nonblocking, encode_message, write_some

__all__ = ["PeerLinks"]

_log = logging.getLogger("zgrad.transport")


class _StreamLink:
    """A link on a stream connection: the socket and the messages (encoded pieces, bytes left,
    whether the outbox counts it) that wait for room, the first maybe partly written."""

    __slots__ = ("sock", "fd", "pending", "failed")

    def __init__(self, sock: socket.socket, hello: bytes) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.pending: collections.deque = collections.deque([(*encode_message([hello]), False)])
        self.failed: str | None = None


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
                link = self._streams[rank] = _StreamLink(sock, self._routing_id)
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

    def _flush_stream(self, dst: int, link: _StreamLink) -> None:
        """Write what waits for ``dst`` until the kernel takes no more; poll for room if some is left."""
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
        """Stop using a stream link: what waits is dropped (counted), later sends are refused."""
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
                self._flush_stream(dst, self._streams[dst])
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
        link = self._streams.pop(rank)
        if self._stream_fds.pop(link.fd, None) is not None:
            self._poller.unregister(link.fd)
        link.sock.close()

    def close_streams(self) -> None:
        """Close every stream link (teardown; what the kernel holds still reaches the peer)."""
        for rank in list(self._streams):
            self._close_stream(rank)
