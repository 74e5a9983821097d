"""A link on a ZeroMQ DEALER: the only kind with CURVE, and the kind of a peer that announced no
stream socket. Only the I/O thread uses it; other threads' messages take the outbox."""

from __future__ import annotations

import collections

import zmq

from zgrad.transport.loop.links.base import Link, LinkShared
from zgrad.transport.sockets import MeshSockets, send_frames

__all__ = ["DealerLink"]


class DealerLink(Link):
    """A link on the DEALER ``sock`` (kept in ``sockets.dealers``, which closes it at teardown if
    the link has not); ``copy_buffers``: copy every frame on send."""

    __slots__ = ("sock", "queue", "refused", "_sockets", "_copy")

    def __init__(self, rank: int, shared: LinkShared, sockets: MeshSockets, sock: zmq.Socket,
                 copy_buffers: bool) -> None:
        super().__init__(rank, shared)
        self.sock = sock
        self.queue: collections.deque = collections.deque()  # (frames, accounted)
        self.refused = False
        self._sockets = sockets
        self._copy = copy_buffers
        sockets.dealers[rank] = sock

    def send(self, frames: list, accounted: bool) -> bool:
        if self.refused:
            return False
        queue = self.queue
        queue.append((frames, accounted))
        if len(queue) == 1:
            self._flush()
        return True

    def write(self, frames: list, nbytes: int) -> bool:
        return False  # a DEALER is the I/O thread's alone

    def on_writable(self) -> None:
        self._flush()

    def idle(self) -> bool:
        return not self.queue

    def _flush(self) -> None:
        """Hand queued messages to ZeroMQ until its high-water mark is reached."""
        queue = self.queue
        sock = self.sock
        shared = self.shared
        moved = accounted_moved = 0
        while queue:
            frames, accounted = queue[0]
            try:
                send_frames(sock, frames, self._copy)
            except zmq.Again:
                shared.poll_out(sock, self)
                break
            queue.popleft()
            moved += 1
            accounted_moved += accounted
        if not queue:
            shared.unpoll(sock)
        shared.moved(self.rank, moved, accounted_moved)

    def drop(self, close: bool) -> int:
        self.refused = True
        dropped = self.shared.forget_queued(self.rank, self.queue, 1)
        self.shared.unpoll(self.sock)
        if close:
            self.close()
        return dropped

    def close(self) -> None:
        self.shared.unpoll(self.sock)
        if self._sockets.dealers.get(self.rank) is self.sock:
            del self._sockets.dealers[self.rank]
        self.sock.close(linger=0)
