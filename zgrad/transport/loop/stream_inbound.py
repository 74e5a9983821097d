"""The receiving side of the stream sockets: the listener, the accepted connections, the replies.

The leader of the I/O role (``role.py``) polls the listener and every connection beside its
ZeroMQ sockets and calls :meth:`StreamInbound.receive` for each that is readable; it gets back
the complete messages, which it checks and runs as it does ZeroMQ's (``inbound.py``). A
connection is either a peer's link (``links/stream.py``) or one calling thread's caller-direct
connection, told apart by its hello. A reply
goes back on the connection its request came from, written by whichever thread answers, under
the connection's lock (:meth:`StreamConnection.reply`): a thread that lost the role needs no
hand-off to the new leader to answer.

A connection is closed, and the closing counted, when its peer closes it, when it sends bytes
that are not a stream of messages or a first message that is not a valid hello, when it stays
without a hello for ``connect_timeout_s``, when its rank is declared lost, or when a reply
cannot be written within ``send_timeout_s`` (its caller does not read). Only the leader closes
sockets; another thread that finds a connection unusable shuts it down, which the leader then
sees as an end of stream.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from zgrad.transport.frames import Rejected
from zgrad.transport.stats import TransportStats
from zgrad.transport.streams import StreamReader, StreamStalled, send_message, set_timeouts

__all__ = ["StreamConnection", "StreamInbound"]

# Accepted connections kept at once; more are closed as they come (each calling thread of each
# peer holds one).
_MAX_CONNECTIONS = 4096
# Longest a reply's write blocks in one call (then it looks at its deadline and goes on).
_SEND_SLICE_MS = 50


class StreamConnection:
    """One accepted connection: a peer's link, or one calling thread of one peer.

    Attributes:
        rank: the peer's rank once its hello was accepted; None before.
        session: the peer's session, from its hello.
        link: the hello was the peer's routing id: the connection carries its link (every
            message of the pair that is not a caller-direct request), not one thread's calls.
        broken: set when a reply could not be written; the leader then closes the connection.
    """

    __slots__ = ("sock", "fd", "reader", "rank", "session", "link", "lock", "broken", "opened_s", "_send_timeout_s")

    def __init__(self, sock: socket.socket, max_body_bytes: int, send_timeout_s: float, now_s: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.reader = StreamReader(max_body_bytes)
        self.rank: int | None = None
        self.session = 0
        self.link = False
        self.lock = threading.Lock()
        self.broken = False
        self.opened_s = now_s
        self._send_timeout_s = send_timeout_s

    def reply(self, frames: list) -> bool:
        """Write one reply (the frames of ``frames.encode``). Any thread. False if the connection
        is unusable (closed by the peer, or it took nothing for ``send_timeout_s``): the reply is
        dropped, as its caller is gone or does not wait."""
        with self.lock:
            if self.broken:
                return False
            try:
                send_message(self.sock, frames, time.monotonic() + self._send_timeout_s)
            except (StreamStalled, OSError):
                self.broken = True
                self.shut_down()  # the leader sees the end and closes it
                return False
        return True

    def shut_down(self) -> None:
        """End the connection both ways without closing its descriptor (any thread): a thread
        blocked writing on it fails at once, and the leader reads its end."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already ended by the peer


class StreamInbound:
    """The listener and the connections of one mesh. Every method runs on the leader.

    Args:
        listener: the non-blocking listening socket (``streams.listen``), owned by ``MeshSockets``.
        register, unregister: add a file descriptor to / remove it from the leader's poll set.
        stats: the mesh's counters (``stream_connections``, ``stream_closed``, ``dropped``).
        max_body_bytes: the longest message body accepted.
        hello_timeout_s: how long an accepted connection may stay without its hello.
        send_timeout_s: how long a reply may wait for room before its connection is dropped.
    """

    def __init__(self, listener: socket.socket, register: Callable[[int], None], unregister: Callable[[int], None],
                 stats: TransportStats, max_body_bytes: int, hello_timeout_s: float, send_timeout_s: float) -> None:
        self._listener = listener
        self.listen_fd = listener.fileno()
        self._register = register
        self._unregister = unregister
        self._stats = stats
        self._max_body = max_body_bytes
        self._hello_timeout_s = hello_timeout_s
        self._send_timeout_s = send_timeout_s
        self.connections: dict[int, StreamConnection] = {}
        register(self.listen_fd)

    def poll_fds(self) -> list[int]:
        """The listener's and every connection's file descriptor."""
        return [self.listen_fd, *self.connections]

    def accept(self) -> None:
        """Take the connections waiting at the listener."""
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors, say: the connection waits in the backlog
                self._stats.warn_once("the stream listener", "accept_failed", str(exc))
                return
            if len(self.connections) >= _MAX_CONNECTIONS:
                sock.close()
                self._stats.reject("a stream client", "too_many_connections", f"over {_MAX_CONNECTIONS} stream connections")
                continue
            # Blocking, so that a reply is written by one call that the kernel lets through as
            # the caller reads (bounded by the send timeout); the leader reads without waiting.
            sock.setblocking(True)
            set_timeouts(sock, _SEND_SLICE_MS, _SEND_SLICE_MS)
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = StreamConnection(sock, self._max_body, self._send_timeout_s, time.monotonic())
            self.connections[connection.fd] = connection
            self._register(connection.fd)
            self._stats.add("stream_connections")

    def receive(self, fd: int) -> tuple[StreamConnection | None, list[list[Any]]]:
        """Read what connection ``fd`` has: (the connection, its complete messages); the
        connection is None if it ended (closed here; a malformed stream is counted as rejected)."""
        connection = self.connections.get(fd)
        if connection is None:
            return None, []
        try:
            return connection, connection.reader.feed(connection.sock, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return connection, []
        except Rejected as rejected:
            self.reject(connection, rejected)
        except (EOFError, OSError):
            self.close(connection)
        return None, []

    def reject(self, connection: StreamConnection, rejected: Rejected) -> None:
        """Count a bad message from ``connection`` and close it (a stream cannot skip one)."""
        peer = "a stream client" if connection.rank is None else f"rank {connection.rank}"
        self._stats.reject(peer, rejected.reason, rejected.detail + "; stream connection closed")
        self.close(connection)

    def close(self, connection: StreamConnection) -> None:
        """Close one connection now."""
        if self.connections.pop(connection.fd, None) is None:
            return
        self._unregister(connection.fd)
        connection.shut_down()  # a reply blocked in another thread fails now
        with connection.lock:  # then it is out of its send: the descriptor may go
            connection.broken = True
            connection.sock.close()
        self._stats.add("stream_closed")

    def expire(self, now_s: float) -> None:
        """Close the connections that sent no hello in time."""
        late = [c for c in self.connections.values() if c.rank is None and now_s - c.opened_s > self._hello_timeout_s]
        for connection in late:
            self.reject(connection, Rejected("no_hello", f"no hello within {self._hello_timeout_s} s"))

    def drop_rank(self, rank: int) -> None:
        """Close every connection of ``rank`` (declared lost)."""
        for connection in [c for c in self.connections.values() if c.rank == rank]:
            self.close(connection)

    def close_all(self) -> None:
        """Close every connection and stop polling the listener (``MeshSockets.close`` closes it)."""
        for connection in list(self.connections.values()):
            self.close(connection)
        self._unregister(self.listen_fd)
