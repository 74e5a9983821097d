"""The hand-off from sending threads to the I/O thread: a queue, a wake-up, and back-pressure.

Any thread calls :meth:`Outbox.put`; only the I/O thread calls the other methods. A put wakes
the I/O thread through an inproc socket at most once per drain (a flag says whether a wake-up
is already pending), so a burst of sends costs one wake-up. The wake socket is the one socket
not confined to the I/O thread; a lock of its own serializes every use of it, taken after the
queue lock is released so that the woken I/O thread does not find the queue still locked.

Back-pressure: each peer may have at most ``high_water_mark`` messages waiting in front of
ZeroMQ. A sender beyond that waits up to ``send_timeout_s`` and then fails; the I/O thread
itself never waits (it would wait for itself) and may exceed the limit.

The I/O thread's own messages to peers (replies sent from ``on_message``) skip the queue: they go
to :attr:`Outbox.send_now`, which first sends whatever the queue holds, so the order in which
messages took the outbox is kept. Other threads' messages skip it too while the I/O thread
sleeps in its poll and nothing to that peer waits here or in front of its link:
:attr:`Outbox.write_now` writes them on the link (a stream) from the sending thread, which
saves waking it (``links/stream.py``); while it is awake anyway, queueing is cheaper for the
sender and a burst leaves in one turn. Messages to the worker itself are always queued, so that a handler
answering itself is not re-entered.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from zgrad.errors import TransportError, WorkerUnavailableError, ZgradTimeoutError

__all__ = ["Outbox"]


class Outbox:
    """Outbound messages waiting for the I/O thread.

    Args:
        high_water_mark: most messages per peer waiting in front of ZeroMQ.
        send_timeout_s: longest a sender waits for room.
        describe: rank -> human-readable worker description for error messages.
    """

    def __init__(self, high_water_mark: int, send_timeout_s: float, describe: Callable[[int], str]):
        self._limit = high_water_mark
        self._send_timeout_s = send_timeout_s
        self._describe = describe
        self._lock = threading.Lock()
        self._wake_lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._queue: collections.deque = collections.deque()
        self._waiting: collections.Counter[int] = collections.Counter()
        self._dead: dict[int, str] = {}
        self._closed_reason: str | None = None
        self._wake: zmq.Socket | None = None
        self._wake_pending = False
        self._blocked_senders = 0
        self.io_thread_id: int | None = None
        self.send_now: Callable[[int, Any], bool] | None = None
        self.write_now: Callable[[int, Any], bool] | None = None
        self.leader_idle = False  # the I/O thread sleeps in its poll (set and read without a lock)
        self.io_rank: int | None = None

    def attach(self, wake: zmq.Socket) -> None:
        """Set the socket that wakes the I/O thread."""
        with self._wake_lock:
            self._wake = wake

    def put(self, dst: int, item: Any) -> None:
        """Queue ``item`` for peer ``dst`` and wake the I/O thread. Thread-safe.

        Blocks only while ``dst`` already has ``high_water_mark`` messages waiting, for at most
        ``send_timeout_s``.

        Raises:
            WorkerUnavailableError: ``dst`` is known to be dead.
            TransportError: the mesh is closed.
            ZgradTimeoutError: no room for ``dst`` within ``send_timeout_s``.
        """
        on_io_thread = threading.get_ident() == self.io_thread_id
        if on_io_thread and self.send_now is not None and dst != self.io_rank:
            # Only the I/O thread marks peers dead, and a closed outbox stays closed: no lock needed.
            self.check(dst)
            if self.send_now(dst, item):
                return
            on_io_thread = False  # the role moved on meanwhile: queue it for the new leader
        if not on_io_thread and self.leader_idle and self.write_now is not None and dst != self.io_rank \
                and self.write_now(dst, item):
            return
        with self._lock:
            deadline_s = None
            while True:
                self.check(dst)
                if on_io_thread or self._waiting[dst] < self._limit:
                    break
                now_s = time.monotonic()
                deadline_s = deadline_s or now_s + self._send_timeout_s
                if now_s >= deadline_s:
                    raise ZgradTimeoutError(
                        f"sending to {self._describe(dst)}: {self._limit} messages (transport.high_water_mark) "
                        f"have waited for {self._send_timeout_s} s (transport.send_timeout_s) without being taken; "
                        "the peer is slow or stuck: send less, or raise those limits"
                    )
                self._blocked_senders += 1
                try:
                    self._room.wait(deadline_s - now_s)
                finally:
                    self._blocked_senders -= 1
            self._queue.append(item)
            self._waiting[dst] += 1
            wake = not on_io_thread and not self._wake_pending
            if wake:
                self._wake_pending = True
        if wake:
            self._poke()

    def wake(self) -> None:
        """Wake the I/O thread for a turn (from another thread; a no-op on the I/O thread or
        while a wake-up is pending). Thread-safe."""
        if threading.get_ident() == self.io_thread_id:
            return
        with self._lock:
            if self._wake_pending or self._closed_reason is not None:
                return
            self._wake_pending = True
        self._poke()

    def _poke(self) -> None:
        with self._wake_lock:
            if self._wake is not None:
                self._wake.send(b"", zmq.NOBLOCK)

    def check(self, dst: int) -> None:
        """Raise if nothing can be sent to ``dst``. Thread-safe.

        Raises:
            TransportError: the mesh is closed.
            WorkerUnavailableError: ``dst`` was declared dead.
        """
        if self._closed_reason is not None:
            raise TransportError(self._closed_reason)
        reason = self._dead.get(dst)
        if reason is not None:
            raise WorkerUnavailableError(f"{self._describe(dst)} is unavailable: {reason}")

    def nothing_waiting(self, dst: int) -> bool:
        """Whether no message to ``dst`` waits here or in front of its link (a message written
        now would be in order). Thread-safe; raises as :meth:`check`."""
        with self._lock:
            self.check(dst)
            return not self._waiting[dst]

    def take_all(self, woken: bool) -> list:
        """Return and clear the queue (I/O thread). ``woken``: one wake message was just consumed."""
        with self._lock:
            if woken:
                self._wake_pending = False
            items = list(self._queue)
            self._queue.clear()
            return items

    def has_queued(self) -> bool:
        """Whether anything waits in the queue (I/O thread; a racing put is ordered after)."""
        return bool(self._queue)

    def handed_over(self, dst: int, n: int = 1) -> None:
        """Record that ``n`` messages to ``dst`` left the outbox (sent or dropped)."""
        with self._lock:
            left = self._waiting[dst] - n
            if left > 0:
                self._waiting[dst] = left
            else:
                del self._waiting[dst]
            if self._blocked_senders:
                self._room.notify_all()

    def mark_dead(self, dst: int, reason: str) -> None:
        """From now on, sends to ``dst`` fail at once with ``reason``; waiting senders wake up."""
        with self._lock:
            self._dead.setdefault(dst, reason)
            self._room.notify_all()

    def dead_reason(self, dst: int) -> str | None:
        """Return why ``dst`` was declared dead, or ``None``. Thread-safe (entries are only ever
        added, and one dict lookup is atomic: no lock)."""
        return self._dead.get(dst)

    def close(self, reason: str) -> bool:
        """Refuse further sends with ``reason`` and wake the I/O thread. Returns False if already closed."""
        with self._lock:
            if self._closed_reason is not None:
                return False
            self._closed_reason = reason
            self._room.notify_all()
            self._wake_pending = True
        self._poke()
        return True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed_reason is not None

    def detach(self) -> None:
        """Forget the wake socket (I/O thread, before closing it)."""
        with self._wake_lock:
            self._wake = None
