"""Plain stream sockets for caller-direct requests and links: the wire, the reader, the writers, the addresses.

A small call over ZeroMQ wakes the sender's ZeroMQ I/O thread, the receiver's, and then the
receiving thread: on a 2-vCPU machine those hops cost more than zgrad's own work (``bench/rpc.py``
measures both paths; docs/transport.md, Performance). A stream socket that the calling thread owns, and that the
callee's leader reads itself, costs one wake-up per direction. So when CURVE is off, each worker
also listens on a stream socket (TCP beside a ``tcp://`` endpoint, a Unix socket beside an
``ipc://`` one) and announces it in the worker table; callers send their caller-direct requests
there (``caller_sockets.py``), workers dial it as their link to the peer
(``links/stream.py``), and the peer's leader polls it with its ZeroMQ sockets
(``stream_inbound.py``).

One message on a stream, everything big-endian::

    head     !4sIQ  magic b"zgsm", frame count n (1 .. MAX_FRAMES), body length
    body     n x !Q frame lengths, then the frames one after the other

The frames are those of ``frames.encode`` (checked by ``frames.decode`` as ZeroMQ's are). The
first message on a new connection is the hello: one frame, the caller-direct id
(``caller_sockets.DIRECT_ID``: magic, rank, session, serial), or a link's routing id
(``inbound.ROUTING_ID``: magic, rank, session), checked like a routing id.

Standard library only (plus ``frames.Rejected``).
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import time
from collections.abc import Sequence
from typing import Any

from zgrad.transport.frames import Rejected

__all__ = ["STREAM_HEAD", "STREAM_MAGIC", "MAX_FRAMES", "StreamReader", "StreamStalled", "send_message",
           "encode_message", "write_some", "connect_nonblocking",
           "stream_address", "listen", "connect", "set_timeouts"]

STREAM_HEAD = struct.Struct("!4sIQ")
STREAM_MAGIC = b"zgsm"
# Far above what ``frames.encode`` makes (1 + buffers + chunks); a bound on the lengths table.
MAX_FRAMES = 1 << 16
_LENGTH = struct.Struct("!Q")
_LENGTHS = tuple(struct.Struct(f"!{n}Q") for n in range(8))
# Received bytes land here first; a message whose body does not fit is read into a buffer of its own.
_SCRATCH_BYTES = 1 << 16
# Small messages go as one send of one bytes object: cheaper than a gathered send of two.
_JOIN_MAX_BYTES = 1 << 14
# Buffers per gathered send (Linux's IOV_MAX is 1024).
_MAX_IOV = 512
# A Unix socket's path must fit in sockaddr_un.
_MAX_UNIX_PATH = 107


class StreamStalled(Exception):
    """A message could not be written in time: the peer does not read (the connection is unusable)."""


class StreamReader:
    """Cuts the bytes of one connection into messages, each a list of frame views.

    Small messages are received into a scratch buffer (several per receive) and copied out into
    a buffer of their own; a message too big for it is received straight into its own buffer.
    Either way the frames of a message are views of a buffer nobody else uses: they may be kept.

    Args:
        max_body_bytes: the longest body accepted (the message cap plus its lengths table).
    """

    __slots__ = ("_scratch", "_view", "_start", "_end", "_body", "_filled", "_nframes", "_max_body")

    def __init__(self, max_body_bytes: int) -> None:
        self._scratch = bytearray(_SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._start = 0
        self._end = 0
        self._body: memoryview | None = None  # the big message being received, if any
        self._filled = 0
        self._nframes = 0
        self._max_body = max_body_bytes

    def feed(self, sock: socket.socket, flags: int = 0) -> list[list[memoryview]]:
        """Receive once from ``sock`` (with ``flags``, e.g. ``MSG_DONTWAIT``) and return the
        messages completed by it (maybe none).

        A message too big for the scratch buffer is then received on, straight into its own
        buffer, for as long as bytes come without waiting (``flags``) or, on a blocking socket,
        until it is complete or the socket's receive timeout passes: one message is one wake-up
        of the reader, not one per piece the kernel hands over.

        Raises:
            EOFError: the peer closed the connection.
            Rejected: the bytes are not a stream of messages (the connection is unusable).
            BlockingIOError, OSError: as ``sock.recv_into`` (nothing was lost: call again).
        """
        messages: list[list[memoryview]] = []
        if self._body is None:
            n = sock.recv_into(self._view[self._end:], 0, flags)
            if n == 0:
                raise EOFError("the peer closed the connection")
            self._end += n
            messages = self._parse()
            if self._body is None:
                return messages
        body = self._body
        try:
            while self._filled < body.nbytes:
                n = sock.recv_into(body[self._filled:], 0, flags)
                if n == 0:
                    raise EOFError("the peer closed the connection")
                self._filled += n
        except (BlockingIOError, InterruptedError):
            return messages  # the rest comes later
        self._body = None
        messages.append(_split(body, self._nframes))
        return messages

    def _parse(self) -> list[list[memoryview]]:
        messages = []
        view = self._view
        while True:
            start = self._start
            available = self._end - start - STREAM_HEAD.size
            if available < 0:
                break
            magic, nframes, body_bytes = STREAM_HEAD.unpack_from(view, start)
            if magic != STREAM_MAGIC:
                raise Rejected("bad_stream", f"stream message magic {bytes(magic)!r}; expected {STREAM_MAGIC!r}")
            if not 0 < nframes <= MAX_FRAMES:
                raise Rejected("bad_stream", f"stream message of {nframes} frames; 1..{MAX_FRAMES} allowed")
            if not nframes * _LENGTH.size <= body_bytes <= self._max_body:
                raise Rejected("too_large" if body_bytes > self._max_body else "bad_stream",
                               f"stream message body of {body_bytes} bytes for {nframes} frames; the cap is "
                               f"{self._max_body} (transport.max_message_mb)")
            begin = start + STREAM_HEAD.size
            if available >= body_bytes:
                messages.append(_split(memoryview(bytearray(view[begin:begin + body_bytes])), nframes))
                self._start = begin + body_bytes
                continue
            if body_bytes > _SCRATCH_BYTES - STREAM_HEAD.size:  # too big for the scratch buffer
                body = memoryview(bytearray(body_bytes))
                body[:available] = view[begin:self._end]
                self._body, self._filled, self._nframes = body, available, nframes
                self._start = self._end = 0
                return messages
            break
        if self._start == self._end:
            self._start = self._end = 0
        elif self._start:  # keep the partial message at the front: room for the rest
            rest = self._end - self._start
            self._scratch[:rest] = self._scratch[self._start:self._end]
            self._start, self._end = 0, rest
        return messages


def _split(body: memoryview, nframes: int) -> list[memoryview]:
    table = nframes * _LENGTH.size
    lengths = (_LENGTHS[nframes] if nframes < len(_LENGTHS) else struct.Struct(f"!{nframes}Q")).unpack_from(body)
    if table + sum(lengths) != body.nbytes:
        raise Rejected("bad_stream", f"stream frame lengths add up to {sum(lengths)} bytes; the body holds {body.nbytes - table}")
    parts = []
    offset = table
    for n in lengths:
        parts.append(body[offset:offset + n])
        offset += n
    return parts


def encode_message(frames: Sequence[Any]) -> tuple[list[Any], int]:
    """The pieces to write for one message (the frames of ``frames.encode``, or a hello) and
    their total length: one bytes object for a small message, else the head and lengths table
    followed by the frames themselves (not copied)."""
    sizes = [len(f) if type(f) is bytes else memoryview(f).nbytes for f in frames]
    nframes = len(sizes)
    head = STREAM_HEAD.pack(STREAM_MAGIC, nframes, nframes * _LENGTH.size + sum(sizes))
    table = _LENGTHS[nframes].pack(*sizes) if nframes < len(_LENGTHS) else struct.pack(f"!{nframes}Q", *sizes)
    total = len(head) + len(table) + sum(sizes)
    if total <= _JOIN_MAX_BYTES:
        return [b"".join([head, table, *frames])], total
    return [head + table, *frames], total


def write_some(sock: socket.socket, pending: list[Any], total: int) -> tuple[list[Any], int]:
    """Write as much of ``pending`` (``total`` bytes, from :func:`encode_message`) as ``sock``
    takes now, without waiting for room; return what is left and its length (0: all written).

    Raises:
        OSError: the connection failed (reset, broken pipe).
    """
    while total:
        try:
            sent = sock.sendmsg(pending[:_MAX_IOV], (), socket.MSG_DONTWAIT) if len(pending) > 1 \
                else sock.send(pending[0], socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            break
        total -= sent
        if total:
            pending = _advance(pending, sent)
    return pending, total


def send_message(sock: socket.socket, frames: Sequence[Any], deadline_s: float) -> None:
    """Write one message (the frames of ``frames.encode``, or a hello) to ``sock``, whole.

    ``sock`` may be non-blocking or carry a send timeout: while it takes no more, this waits
    until it does, at most until ``deadline_s`` (``time.monotonic()``).

    Raises:
        StreamStalled: ``deadline_s`` passed with the message partly written (drop the connection).
        OSError: the connection failed (reset, broken pipe).
    """
    pending, total = encode_message(frames)
    while True:
        try:
            sent = sock.sendmsg(pending[:_MAX_IOV]) if len(pending) > 1 else sock.send(pending[0])
        except (BlockingIOError, InterruptedError):
            sent = 0
        total -= sent
        if total == 0:
            return
        pending = _advance(pending, sent)
        if sent == 0:
            remaining_s = deadline_s - time.monotonic()
            if remaining_s <= 0:
                raise StreamStalled("the peer took no more of the message in time")
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLOUT)
            poller.poll(int(min(remaining_s, 0.05) * 1000) + 1)


def _advance(pending: list[Any], sent: int) -> list[Any]:
    """``pending`` without its first ``sent`` bytes."""
    i = 0
    while sent:
        n = memoryview(pending[i]).nbytes
        if sent < n:
            pending[i] = memoryview(pending[i])[sent:]
            break
        sent -= n
        i += 1
    return pending[i:]


# -- addresses --------------------------------------------------------------------------------


def stream_address(bound_endpoint: str, advertised_endpoint: str) -> tuple[Any, str] | None:
    """Where to listen beside a ZeroMQ endpoint, and the address to announce:
    ``(("tcp", host), "tcp://<advertised host>:")`` (the port is known once bound) or
    ``(("ipc", path), "ipc://<path>")``; None where no stream socket fits (inproc, plugins,
    a path too long for a Unix socket)."""
    if bound_endpoint.startswith("tcp://") and advertised_endpoint.startswith("tcp://"):
        host = bound_endpoint[6:].rpartition(":")[0]
        advertised_host = advertised_endpoint[6:].rpartition(":")[0]
        return ("tcp", host.strip("[]")), f"tcp://{advertised_host}:"
    if bound_endpoint.startswith("ipc://"):
        path = bound_endpoint[6:] + ".stream"
        if len(os.fsencode(path)) > _MAX_UNIX_PATH:
            return None
        return ("ipc", path), f"ipc://{path}"
    return None


def listen(where: tuple[str, str], announce_prefix: str, backlog: int = socket.SOMAXCONN) -> tuple[socket.socket, str]:
    """Open the non-blocking listening socket ``where`` (from :func:`stream_address`) and return
    it with the address peers dial.

    Raises:
        OSError: it cannot be bound.
    """
    scheme, host_or_path = where
    if scheme == "tcp":
        family = socket.AF_INET6 if ":" in host_or_path else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((host_or_path, 0))
            port = sock.getsockname()[1]
            address = f"{announce_prefix}{port}"
        except BaseException:
            sock.close()
            raise
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if os.path.exists(host_or_path):
                os.unlink(host_or_path)  # a leftover of a process that died with this path
            sock.bind(host_or_path)
            os.chmod(host_or_path, 0o600)
        except BaseException:
            sock.close()
            raise
        address = announce_prefix
    sock.listen(backlog)
    sock.setblocking(False)
    return sock, address


def connect(address: str, timeout_s: float) -> socket.socket:
    """Connect to a peer's stream ``address`` (blocking, at most ``timeout_s``); the socket comes
    back blocking, without delay on small writes.

    Raises:
        OSError: the connection failed (``TimeoutError`` when it took too long).
        ValueError: ``address`` is not a stream address.
    """
    if address.startswith("tcp://"):
        host, _, port = address[6:].rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    elif address.startswith("ipc://"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        deadline_s = time.monotonic() + timeout_s
        pause_s = 0.001
        try:
            while True:
                try:
                    sock.connect(address[6:])
                    break
                except BlockingIOError:
                    # A Unix socket refuses at once while its listener's backlog is full (TCP
                    # would retry its handshake): try again until the timeout.
                    if time.monotonic() + pause_s > deadline_s:
                        raise TimeoutError(f"{address}: its listener took no connection within {timeout_s} s") from None
                    time.sleep(pause_s)
                    pause_s = min(2 * pause_s, 0.05)
        except BaseException:
            sock.close()
            raise
    else:
        raise ValueError(f"{address!r} is not a stream address (tcp://host:port or ipc://path)")
    sock.settimeout(None)
    return sock


def connect_nonblocking(address: str) -> socket.socket:
    """Start connecting to a peer's stream ``address`` without waiting: the socket comes back
    non-blocking (TCP without delay on small writes); what is written before the connection is
    up waits for POLLOUT like any write the kernel has no room for.

    Raises:
        OSError: the connection was refused at once (a Unix socket nobody listens on).
        ValueError: ``address`` is not a stream address.
    """
    if address.startswith("tcp://"):
        host, _, port = address[6:].rpartition(":")
        host = host.strip("[]")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        target: Any = (host, int(port))
    elif address.startswith("ipc://"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target = address[6:]
    else:
        raise ValueError(f"{address!r} is not a stream address (tcp://host:port or ipc://path)")
    sock.setblocking(False)
    error = sock.connect_ex(target)
    if error not in (0, errno.EINPROGRESS):
        sock.close()
        raise OSError(error, f"cannot connect to {address}: {os.strerror(error)}")
    return sock


def set_timeouts(sock: socket.socket, receive_ms: int, send_ms: int | None = None) -> None:
    """Bound each blocking receive (and send) of ``sock`` by the kernel (SO_RCVTIMEO, SO_SNDTIMEO;
    at least 1 ms, as 0 means no bound): the call then fails with EAGAIN, one system call where
    Python's own timeout takes two."""
    for option, ms in ((socket.SO_RCVTIMEO, receive_ms), (socket.SO_SNDTIMEO, send_ms)):
        if ms is not None:
            ms = max(1, ms)
            sock.setsockopt(socket.SOL_SOCKET, option, struct.pack("ll", ms // 1000, ms % 1000 * 1000))
