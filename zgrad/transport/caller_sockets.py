"""Caller-direct sockets: a thread that waits for a reply sends its request and waits on its own socket.

"Caller-direct" (``direct`` in config keys and stats: ``direct_max_kb``, ``direct_streams``,
``direct_requests``) always means this path: the calling thread's own socket to the callee's
leader and back, no I/O thread on the caller's side. The mesh (``mesh.py``) decides which
requests take it.

Each thread that makes a synchronous request gets, lazily, one socket per peer. Where the peer
announced a stream socket (CURVE off, tcp or ipc; ``streams.py``) it is a plain stream connected
there, whose first message is the caller's id (:data:`DIRECT_ID`: magic, rank, session, a serial
number); the callee's leader reads it beside its ZeroMQ sockets and the reply comes back on the
same connection. Otherwise it is a DEALER connected to the peer's inbound ROUTER like the I/O
thread's own link (the same CURVE keys, so the peer's ZAP handler binds it to this worker's
rank), with that id as its routing id; the callee answers on its inbound socket to that routing
id. Either way the reply arrives on the socket the caller waits on: no thread hand-off on
either side of the caller (``docs/architecture.md``, "Callers talk directly"). A stream also
skips ZeroMQ's own I/O threads, a wake-up each at both ends. The two kinds sit behind one
interface (``caller_socket.py``), so the waits below are written once.

The caller waits in slices of at most :data:`WAIT_SLICE_S`, between which it looks whether the
peer was declared lost, the mesh closed or the deadline passed. A reply whose request id is not
the one awaited (the answer to a call that was abandoned at its deadline) is dropped and
counted (``late_replies``). Sockets stay open until their thread ends or the mesh closes them all
(:meth:`close`): each is used under its own lock, held by its thread for one slice at a time, so
that closing waits for the slice instead of pulling the socket from under a waiter.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import zmq

from zgrad.errors import TransportError, WorkerUnavailableError, ZgradTimeoutError
from zgrad.transport import frames as fr
from zgrad.transport.caller_socket import CallerSocket, ConnectionEnded, DealerSocket, StreamSocket
from zgrad.transport.envelope import Envelope
from zgrad.transport.security import CurveKeys
from zgrad.transport.sockets import open_dealer
from zgrad.transport.streams import StreamStalled, connect, send_message, set_timeouts

__all__ = ["CallerSockets", "DIRECT_ID", "DIRECT_MAGIC", "WAIT_SLICE_S"]

DIRECT_ID = struct.Struct("!4sIQI")
DIRECT_MAGIC = b"zgdc"
_POLLIN = int(zmq.POLLIN)
_log = logging.getLogger("zgrad.transport")
# Longest uninterrupted wait: how late a waiter notices a lost peer, a closed mesh or its deadline.
WAIT_SLICE_S = 0.05
# Longest a leader waits for its reply before it hands its role on (it does at once when anything
# else arrives): inbound traffic waits at most this long behind a nested call.
LEADING_WAIT_S = 0.002


def _fresh_buffer(nbytes: int) -> memoryview:
    return memoryview(bytearray(nbytes))


class _ThreadSockets(dict):
    """One thread's sockets, by peer (a dict that a finalizer can watch: see ``CallerSockets._socket``)."""


def _forget_thread(caller_ref: Any, owned: list[CallerSocket]) -> None:
    """A thread ended: close the sockets it made (a callee would otherwise keep a connection per
    thread that ever called it)."""
    caller = caller_ref()
    for sock in owned:
        if caller is not None:
            with caller._lock:
                if sock in caller._all:
                    caller._all.remove(sock)
        with sock.lock:
            if not sock.closed:
                sock.close()


class CallerSockets:
    """The caller-direct sockets of one mesh, per thread and per peer.

    Args:
        context: the mesh's ZeroMQ context.
        config: ``[transport]``.
        keys: this worker's CURVE keys, or None.
        rank, session: this worker's rank and session (in the routing ids).
        endpoint_of: rank -> the endpoint its inbound socket is bound at.
        dead_reason: rank -> why it was declared lost, or None.
        valid_kinds: the kinds a reply may have (checked by ``frames.decode``).
        before_wait: called once before each wait (the leader hands its role on; see ``role.py``).
        copy_buffers: copy every frame on send (the transport shares memory between workers).
        wait_leading: ``(socket, timeout_s) -> bool | None``: a leader first waits for its reply
            on ``socket`` while keeping the role, as long as nothing else arrives: True if the
            reply is there and it still leads, False if it must hand the role on first, None if
            the calling thread does not lead (see ``IoLoop.wait_as_leader``). None: never.
        describe: rank -> the worker, for error messages.
        stream_of: rank -> the address of its stream socket ("" if none: use ZeroMQ). None: never.
        on_late_reply: ``(rank, request_id)`` of a reply dropped as late (the call was abandoned).
    """

    def __init__(self, context: zmq.Context, config: Any, keys: CurveKeys | None, rank: int, session: int,
                 endpoint_of: Callable[[int], str], dead_reason: Callable[[int], str | None],
                 valid_kinds: frozenset[int], before_wait: Callable[[], None], describe: Callable[[int], str],
                 wait_leading: Callable[[Any, float], bool | None] | None = None,
                 copy_buffers: bool = False, stream_of: Callable[[int], str] | None = None,
                 on_late_reply: Callable[[int, int], None] | None = None) -> None:
        self._context = context
        self._config = config
        self._keys = keys
        self._rank = rank
        self._session = session
        self._endpoint_of = endpoint_of
        self._dead_reason = dead_reason
        self._valid_kinds = valid_kinds
        self._before_wait = before_wait
        self._wait_leading = wait_leading
        self._describe = describe
        self._copy_buffers = copy_buffers
        self._stream_of = stream_of
        self._on_late_reply = on_late_reply
        self._counts: list[list[int]] = []  # per thread: [replies received, their buffer bytes]
        self._max_bytes = config.max_message_mb << 20
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[CallerSocket] = []
        self._serial = 0
        self._closed_reason: str | None = None
        self.late_replies = 0
        self.requests = 0

    def _socket(self, dst: int) -> CallerSocket:
        mine = getattr(self._local, "sockets", None)
        if mine is None:
            mine = self._local.sockets = _ThreadSockets()
            self._local.owned = owned = []
            # When the thread ends its thread-local values go, and with them ``mine``: close its sockets.
            weakref.finalize(mine, _forget_thread, weakref.ref(self), owned).atexit = False
            counts = self._local.counts = [0, 0]  # this thread's own: no lock on the hot path
            with self._lock:
                self._counts.append(counts)
        sock = mine.get(dst)
        if sock is None or sock.closed:
            with self._lock:
                if self._closed_reason is not None:
                    raise TransportError(self._closed_reason)
                self._serial += 1
                ident = DIRECT_ID.pack(DIRECT_MAGIC, self._rank, self._session, self._serial)
            address = self._stream_of(dst) if self._stream_of is not None else ""
            stream = self._connect_stream(dst, address, ident) if address else None
            with self._lock:
                if self._closed_reason is not None:
                    if stream is not None:
                        stream.close()
                    raise TransportError(self._closed_reason)
                if stream is not None:
                    sock = StreamSocket(stream, self._max_bytes)
                else:
                    peer_key = self._keys.peers[dst] if self._keys is not None else None
                    dealer = open_dealer(self._context, self._endpoint_of(dst), ident, self._config, self._keys, peer_key)
                    sock = DealerSocket(dealer, self._copy_buffers)
                mine[dst] = sock
                self._local.owned.append(sock)
                self._all.append(sock)
        return sock

    def _connect_stream(self, dst: int, address: str, ident: bytes) -> socket.socket | None:
        """Connect to ``dst``'s stream socket and say who calls; None (logged) if that fails: the
        thread then uses ZeroMQ to reach it."""
        timeout_s = self._config.connect_timeout_s
        try:
            stream = connect(address, timeout_s)
        except OSError as exc:
            _log.warning("cannot connect to the stream socket of %s at %s (%s); calls from this thread use ZeroMQ",
                         self._describe(dst), address, exc)
            return None
        try:
            slice_ms = int(WAIT_SLICE_S * 1000)
            set_timeouts(stream, slice_ms, slice_ms)
            send_message(stream, [ident], time.monotonic() + timeout_s)
        except (OSError, StreamStalled) as exc:
            stream.close()
            _log.warning("the stream socket of %s at %s failed at once (%s); calls from this thread use ZeroMQ",
                         self._describe(dst), address, exc)
            return None
        return stream

    def call(self, dst: int, request_id: int, frames: list, deadline_s: float | None) -> Envelope:
        """Send ``frames`` (one encoded message) to ``dst`` and return its reply. Blocks.

        Args:
            dst: the peer.
            request_id: the request id inside ``frames``; replies with another one are dropped.
            frames: from ``frames.encode``.
            deadline_s: ``time.monotonic()`` value to give up at; None waits as long as the peer lives.

        Raises:
            WorkerUnavailableError: ``dst`` was (or is, while waiting) declared lost.
            ZgradTimeoutError: ``deadline_s`` passed first.
            TransportError: the mesh is closed.
        """
        reason = self._dead_reason(dst)
        if reason is not None:
            raise WorkerUnavailableError(f"{self._describe(dst)} is unavailable: {reason}")
        sock = self._socket(dst)
        self.requests += 1
        request_ids = (request_id,)
        send_deadline_s = time.monotonic() + self._config.send_timeout_s if deadline_s is None else deadline_s
        sent = False
        first = True
        while True:
            with sock.lock:
                if sock.closed:
                    raise TransportError(self._closed_reason or "the mesh is closed")
                if not sent:
                    sent = self._send(sock, dst, frames, send_deadline_s)
                if first:
                    # A leader (a handler making a nested call) keeps its role while the reply is
                    # quick and nothing else arrives: then it answers its own caller directly.
                    first = False
                    leads: bool | None = True  # unknown: hand the role on if this thread has it
                    if sent and self._wait_leading is not None:
                        budget_s = LEADING_WAIT_S if deadline_s is None else min(LEADING_WAIT_S, deadline_s - time.monotonic())
                        if budget_s > 0:
                            leads = self._wait_leading(sock.handle, budget_s)
                            if leads:
                                replies = self._receive(sock, dst, request_ids, None)
                                if replies:
                                    return replies[0]
                    if leads is not None:  # None: not the leader, nothing to hand on
                        self._before_wait()
                wait_s = WAIT_SLICE_S if deadline_s is None else min(WAIT_SLICE_S, deadline_s - time.monotonic())
                if wait_s > 0:
                    wait_ms = int(wait_s * 1000) + 1
                    if sent:
                        replies = self._receive(sock, dst, request_ids, wait_ms)
                        if replies:
                            return replies[0]
                    else:
                        sock.wait_writable(wait_ms)
            self.check_waiting(dst, deadline_s)

    def check_waiting(self, dst: int, deadline_s: float | None) -> None:
        """A wait slice passed without the reply to a request to ``dst``: raise if the peer was
        lost, the mesh closed or the deadline passed (also for a reply routed from the link)."""
        reason = self._dead_reason(dst)
        if reason is not None:
            raise WorkerUnavailableError(f"{self._describe(dst)} is unavailable: {reason}")
        if self._closed_reason is not None:
            raise TransportError(self._closed_reason)
        if deadline_s is not None and time.monotonic() >= deadline_s:
            raise ZgradTimeoutError(f"no reply from {self._describe(dst)} in time")

    def _send(self, sock: CallerSocket, dst: int, frames: list, deadline_s: float) -> bool:
        """Send one message on ``sock`` (its lock held); False if it cannot go now. A stream that
        failed is closed (the calling thread makes a new one next time)."""
        try:
            return sock.try_send(frames, deadline_s)
        except StreamStalled:
            self._drop(sock)  # partly written: the stream is out of step
            raise ZgradTimeoutError(f"could not send to {self._describe(dst)} in time") from None
        except OSError as exc:
            self._drop(sock)
            raise WorkerUnavailableError(f"{self._describe(dst)} is unavailable: its connection failed ({exc})") from None

    def _receive(self, sock: CallerSocket, dst: int, request_ids: Any, wait_ms: int | None) -> list[Envelope]:
        """Receive on ``sock`` (its lock held; see :meth:`CallerSocket.receive`) and return the
        replies to ``request_ids`` among what came; the rest is dropped and counted.

        Raises:
            WorkerUnavailableError: the peer closed the stream (it shut down, or found this worker
                lost), or sent what is not a stream of messages.
        """
        try:
            messages = sock.receive(wait_ms)
        except ConnectionEnded as exc:
            self._drop(sock)
            raise WorkerUnavailableError(
                f"{self._describe(dst)} is unavailable: the connection of this call ended ({exc.detail})") from None
        replies = []
        for parts in messages:
            reply = self._accept(parts, dst, request_ids)
            if reply is not None:
                replies.append(reply)
        return replies

    def _drop(self, sock: CallerSocket) -> None:
        """Close the calling thread's unusable socket (its lock held); it makes a new one next time."""
        with self._lock:
            if sock in self._all:
                self._all.remove(sock)
        owned = self._local.owned
        if sock in owned:
            owned.remove(sock)
        sock.close()

    @property
    def replies_in(self) -> int:
        """Replies received on these sockets (every thread's)."""
        with self._lock:
            return sum(counts[0] for counts in self._counts)

    @property
    def reply_bytes_in(self) -> int:
        """The buffer bytes of those replies."""
        with self._lock:
            return sum(counts[1] for counts in self._counts)

    def post(self, dst: int, frames: list, timeout_s: float) -> None:
        """Send ``frames`` on the calling thread's socket to ``dst`` and return at once: the
        answer comes back to that socket (:meth:`collect`). Waits only while the socket
        is not connected yet, at most ``timeout_s``.

        Raises:
            WorkerUnavailableError: ``dst`` was declared lost.
            ZgradTimeoutError: the socket could not take the message within ``timeout_s``.
            TransportError: the mesh is closed.
        """
        deadline_s = time.monotonic() + timeout_s
        while True:
            reason = self._dead_reason(dst)
            if reason is not None:
                raise WorkerUnavailableError(f"{self._describe(dst)} is unavailable: {reason}")
            sock = self._socket(dst)
            with sock.lock:
                if sock.closed:
                    raise TransportError(self._closed_reason or "the mesh is closed")
                if self._send(sock, dst, frames, deadline_s):
                    self.requests += 1
                    return
                wait_s = min(WAIT_SLICE_S, deadline_s - time.monotonic())
                if wait_s > 0:
                    sock.wait_writable(int(wait_s * 1000) + 1)
            if time.monotonic() >= deadline_s:
                raise ZgradTimeoutError(f"could not send to {self._describe(dst)} in time")

    def collect(self, expected: dict[int, set[int]], wake_fds: list[int], timeout_s: float) -> list[Envelope]:
        """Wait on the calling thread's sockets to the peers in ``expected`` (rank -> request ids
        sent with :meth:`post`) and on ``wake_fds``, at most ``timeout_s`` (and one slice); return
        the replies to those requests that arrived (their ids are removed from ``expected``).
        A reply to another request is dropped and counted (``late_replies``). A stream the peer
        closed is dropped and logged, not raised (the peer's loss reaches the waiter's pass
        through the mesh)."""
        mine = getattr(self._local, "sockets", None) or {}
        socks = [(dst, mine[dst]) for dst in sorted(expected) if dst in mine and not mine[dst].closed]
        items: list = [(sock.handle, _POLLIN) for _, sock in socks]
        items.extend((fd, _POLLIN) for fd in wake_fds)
        wait_ms = int(min(max(timeout_s, 0.0), WAIT_SLICE_S) * 1000) + 1
        replies: list[Envelope] = []
        locks = [sock.lock for _, sock in socks]
        for lock in locks:
            lock.acquire()
        try:
            if any(sock.closed for _, sock in socks):  # the mesh closed: only the wake fds are left
                items = items[len(socks):]
                socks = []
            events = zmq.zmq_poll(items, wait_ms)
            ready = {handle for handle, _ in events}
            for dst, sock in socks:
                if sock.handle not in ready:
                    continue
                try:
                    got = self._receive(sock, dst, expected[dst], None)
                except WorkerUnavailableError as exc:
                    # Not raised: the waiter's pass learns of a lost peer from the mesh
                    # (on_peer_lost) and fails as a whole; this stream is dropped.
                    _log.warning("%s", exc)
                    continue
                for reply in got:
                    expected[dst].discard(reply.request_id)
                    replies.append(reply)
        finally:
            for lock in locks:
                lock.release()
        return replies

    def _accept(self, parts: list, src: int, request_ids: Any) -> Envelope | None:
        """Check one received message and return it if it answers one of ``request_ids``; else
        (malformed, or the late answer to an abandoned request) drop and count it."""
        try:
            kind, flags, got_id, meta, buffers = fr.decode(
                parts, valid_kinds=self._valid_kinds, max_message_bytes=self._max_bytes, take_buffer=_fresh_buffer,
            )
        except fr.Rejected:
            self.late_replies += 1  # malformed: counted with the dropped ones
            return None
        if got_id not in request_ids:
            self.late_replies += 1
            if self._on_late_reply is not None:
                self._on_late_reply(src, got_id)
            return None
        counts = self._local.counts
        counts[0] += 1
        for buffer in buffers:
            counts[1] += buffer.nbytes
        return Envelope(src, kind, flags, got_id, meta, buffers, self._keys is not None)

    def has_socket(self, dst: int) -> bool:
        """Whether the calling thread has an open socket to ``dst`` (one it sent on that was not
        closed since: a reply can still come there)."""
        sock = (getattr(self._local, "sockets", None) or {}).get(dst)
        return sock is not None and not sock.closed

    def close(self, reason: str) -> None:
        """Close every caller socket (waiters raise TransportError(``reason``) after their slice)."""
        with self._lock:
            self._closed_reason = reason
            sockets, self._all = self._all, []
        for sock in sockets:
            with sock.lock:
                sock.close()
