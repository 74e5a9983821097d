"""A link on a stream connection (``streams.py``), used when CURVE is off and the peer announced
a stream socket: a message costs one write system call and one wake-up of the peer's leader,
where ZeroMQ adds a wake-up of its own I/O thread on each side.

Any thread may write a stream link itself (:meth:`StreamLink.write`; the outbox offers it while
the I/O thread sleeps) when nothing waits for that peer, neither here nor in the outbox: the
message then leaves without waking the I/O thread. The link's lock is held by whoever writes its
socket or touches its queue (taken before the outbox's lock); what the kernel does not take of
such a write waits in the link's queue, and the I/O thread, woken once, polls for room as for
its own writes. Everything else is the I/O thread's.

A stream link that fails (the peer closed or reset it) drops what is queued and what is sent
to it later, counted as dropped; the peer is then declared lost by its silence, as over ZeroMQ.
"""

from __future__ import annotations

import collections
import logging
import socket
import threading
import time

from zgrad.transport.loop.links.base import Link, LinkShared
from zgrad.transport.streams import encode_message, write_some

__all__ = ["StreamLink"]

_log = logging.getLogger("zgrad.transport")


class StreamLink(Link):
    """A link on the connected (maybe still connecting) stream socket ``sock``; ``hello``, the
    worker's routing id, is its first message.

    ``pending``: the messages (encoded pieces, bytes left, whether the outbox counts it) that wait
    for room, the first maybe partly written; ``failed``: why it refuses messages, or None.
    """

    __slots__ = ("sock", "fd", "pending", "failed", "closed", "lock")

    def __init__(self, rank: int, shared: LinkShared, sock: socket.socket, hello: bytes) -> None:
        super().__init__(rank, shared)
        self.sock = sock
        self.fd = sock.fileno()
        self.pending: collections.deque = collections.deque([(*encode_message([hello]), False)])
        self.failed: str | None = None
        self.closed = False
        self.lock = threading.Lock()

    def send(self, frames: list, accounted: bool) -> bool:
        with self.lock:
            if self.failed is not None:
                return False
            self.pending.append((*encode_message(frames), accounted))
            if len(self.pending) == 1:
                self._flush()
        return True

    def write(self, frames: list, nbytes: int) -> bool:
        shared = self.shared
        with self.lock:
            if self.pending or self.failed is not None or self.closed or not shared.outbox.nothing_waiting(self.rank):
                return False
            pieces, total = encode_message(frames)
            try:
                pieces, total = write_some(self.sock, pieces, total)
            except OSError:
                pass  # left to the I/O thread, whose own write fails the link (and counts the drop)
            else:
                self.thread_writes += 1
                self.thread_bytes += nbytes
            if total:
                self.pending.append((pieces, total, False))
                shared.backlogged.append(self)
        shared.liveness.sent_to(self.rank, time.monotonic())
        if total:
            shared.outbox.wake()
        return True

    def on_writable(self) -> None:
        with self.lock:
            if not self.closed:
                self._flush()

    def idle(self) -> bool:
        return not self.pending

    def _flush(self) -> None:
        """Write what waits until the kernel takes no more; poll for room if some is left. Under
        the lock."""
        pending = self.pending
        shared = self.shared
        moved = accounted_moved = 0
        try:
            while pending:
                pieces, total, accounted = pending[0]
                pieces, total = write_some(self.sock, pieces, total)
                if total:
                    pending[0] = (pieces, total, accounted)
                    break
                pending.popleft()
                moved += 1
                accounted_moved += accounted
        except OSError as exc:
            self._fail(f"its stream link failed: {exc}")
        else:
            if pending:
                shared.poll_out(self.fd, self)
            else:
                shared.unpoll(self.fd)
        shared.moved(self.rank, moved, accounted_moved)

    def _fail(self, reason: str) -> None:
        """Stop using the link: what waits is dropped (counted), later sends are refused. Under
        the lock."""
        if self.failed is None:  # info: a peer that closed after saying goodbye ends here too
            _log.info("link to rank %d: %s; messages to it are dropped until it is declared lost", self.rank, reason)
        self.failed = reason
        dropped = len(self.pending)
        self.shared.forget_queued(self.rank, self.pending, 2)
        if dropped:
            self.shared.stats.add("dropped", dropped)
        self.shared.unpoll(self.fd)

    def drop(self, close: bool) -> int:
        """Closed now, or else it refuses new messages but goes on writing those that wait."""
        with self.lock:
            if close:
                dropped = self.shared.forget_queued(self.rank, self.pending, 2)
                self._close()
                return dropped
            if self.failed is None:
                self.failed = "the peer was declared lost"
        return 0

    def close(self) -> None:
        with self.lock:
            self._close()

    def _close(self) -> None:
        """Under the lock (so that no thread writes a closed, maybe reused, descriptor)."""
        self.closed = True
        self.shared.unpoll(self.fd)
        self.sock.close()
