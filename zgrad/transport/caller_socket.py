"""One calling thread's socket to one peer (``caller_sockets.py``), of either kind: a ZeroMQ DEALER
connected to the peer's inbound ROUTER, or a plain stream connected to the peer's stream socket.

Both kinds offer the same four operations to the waits of :class:`CallerSockets`: send a message
(:meth:`try_send`), wait until one can be sent (:meth:`wait_writable`), receive what arrived
(:meth:`receive`, whole messages as lists of frames), and close. A stream's failures come out as
``streams.StreamStalled`` (a send that could not finish) or :class:`ConnectionEnded`; a DEALER's
peer loss is found by the mesh, not by its socket. Each socket is used under its own ``lock``.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import zmq

from zgrad.transport import frames as fr
from zgrad.transport.sockets import send_frames
from zgrad.transport.streams import MAX_FRAMES, StreamReader, send_message, set_timeouts

__all__ = ["CallerSocket", "ConnectionEnded", "DealerSocket", "StreamSocket"]

_NOBLOCK = int(zmq.NOBLOCK)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)


class ConnectionEnded(Exception):
    """The peer closed a stream, or sent what is not a stream of messages: ``detail`` says which."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class CallerSocket:
    """What both kinds share: ``handle`` (what ``zmq_poll`` waits on), ``lock``, ``closed``."""

    __slots__ = ("handle", "lock", "closed", "_receive_ms")

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.lock = threading.Lock()
        self.closed = False
        self._receive_ms = -1  # the receive timeout set on the socket: how long a blocking receive waits

    def try_send(self, frames: list, deadline_s: float) -> bool:
        """Send one message; False if it cannot go now (then :meth:`wait_writable`)."""
        raise NotImplementedError

    def wait_writable(self, wait_ms: int) -> None:
        """Wait at most ``wait_ms`` for room to send."""
        raise NotImplementedError

    def receive(self, wait_ms: int | None) -> list[list]:
        """The messages that arrived: with ``wait_ms`` None only those already here, else waiting
        at most ``wait_ms`` for the first. Empty if none came."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class DealerSocket(CallerSocket):
    """A DEALER whose routing id says which thread of which worker calls (``DIRECT_ID``).

    Args:
        sock: the connected DEALER.
        copy_buffers: copy every frame on send (the transport shares memory between workers).
    """

    __slots__ = ("sock", "_copy_buffers")

    def __init__(self, sock: zmq.Socket, copy_buffers: bool) -> None:
        super().__init__(sock)
        self.sock = sock
        self._copy_buffers = copy_buffers

    def try_send(self, frames: list, deadline_s: float) -> bool:
        try:
            send_frames(self.sock, frames, self._copy_buffers)
        except zmq.Again:
            return False
        return True

    def wait_writable(self, wait_ms: int) -> None:
        zmq.zmq_poll([(self.sock, _POLLOUT)], wait_ms)  # zmq_poll itself: Socket.poll builds a Poller per call

    def receive(self, wait_ms: int | None) -> list[list]:
        sock = self.sock
        if wait_ms is None:
            messages = []
            while sock.get(zmq.EVENTS) & _POLLIN:
                messages.append(self._rest_of(sock.recv(_NOBLOCK, copy=False)))
            return messages
        # A receive that blocks at most wait_ms (RCVTIMEO): one call where zmq_poll and a receive
        # would be two.
        if self._receive_ms != wait_ms:
            sock.rcvtimeo = self._receive_ms = wait_ms
        try:
            frame = sock.recv(0, copy=False)
        except zmq.Again:
            return []
        return [self._rest_of(frame)]

    def _rest_of(self, frame: zmq.Frame) -> list:
        """The whole message that starts with ``frame`` (its other parts are here: atomic delivery)."""
        parts = [frame]
        while frame.more:
            frame = self.sock.recv(_NOBLOCK, copy=False)
            parts.append(frame)
        return parts

    def close(self) -> None:
        self.closed = True
        self.sock.close(linger=0)


class StreamSocket(CallerSocket):
    """A stream connected to the peer's stream socket, whose first message said who calls.

    Args:
        stream: the connected socket.
        max_body_bytes: the largest message it accepts.
    """

    __slots__ = ("stream", "_reader")

    def __init__(self, stream: socket.socket, max_body_bytes: int) -> None:
        super().__init__(stream.fileno())
        self.stream = stream
        self._reader = StreamReader(max_body_bytes + 8 * MAX_FRAMES)

    def try_send(self, frames: list, deadline_s: float) -> bool:
        """Write the whole message, waiting up to ``deadline_s`` (a stream has no queue to refuse).

        Raises:
            streams.StreamStalled: not all of it went in time (the stream is out of step: close it).
            OSError: the connection failed.
        """
        send_message(self.stream, frames, deadline_s)
        return True

    def wait_writable(self, wait_ms: int) -> None:
        pass  # try_send waits itself

    def receive(self, wait_ms: int | None) -> list[list]:
        """Raises: ConnectionEnded."""
        if wait_ms is not None and self._receive_ms != wait_ms:
            set_timeouts(self.stream, wait_ms)
            self._receive_ms = wait_ms
        try:
            return self._reader.feed(self.stream, socket.MSG_DONTWAIT if wait_ms is None else 0)
        except (BlockingIOError, InterruptedError):
            return []
        except (EOFError, OSError, fr.Rejected) as exc:
            raise ConnectionEnded(exc.detail if isinstance(exc, fr.Rejected) else str(exc) or type(exc).__name__) from None

    def close(self) -> None:
        self.closed = True
        self.stream.close()
