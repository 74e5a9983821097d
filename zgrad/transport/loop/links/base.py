"""What every outbound link is: :class:`Link`, the interface the table (``peer_links.py``) calls
without asking the link's kind, and :class:`LinkShared`, what the links of one worker share.

A link carries every message of one pair, so they arrive in the order sent. A message goes out at
once when nothing waits before it on that link; otherwise (the DEALER's high-water mark is
reached, the kernel has no room for a stream's bytes, or the connection is still being made) it
waits in the link's queue, in order, and the link's socket is polled for POLLOUT until it drains.
Nothing here blocks.

Threads: the I/O thread calls every method, and it alone touches :class:`LinkShared`'s poller
and its ``polled`` table; any thread may call :meth:`Link.write`, which a link refuses unless
it can write the message from the calling thread in order (a stream link, under its lock); such a
write appends to ``backlogged`` what the kernel did not take, for the I/O thread to poll.
"""

from __future__ import annotations

import collections
import time
from abc import ABC, abstractmethod
from typing import Any

import zmq

from zgrad.transport.liveness import Liveness
from zgrad.transport.loop.outbox import Outbox
from zgrad.transport.stats import TransportStats

__all__ = ["Link", "LinkShared"]


class LinkShared:
    """What the links of one worker share: the I/O thread's poller with the links it polls for
    room (by socket or file descriptor), the links other threads left a backlog on, and where a
    link reports messages sent (outbox, liveness) and dropped (stats)."""

    __slots__ = ("poller", "polled", "backlogged", "outbox", "liveness", "stats")

    def __init__(self, poller: zmq.Poller, outbox: Outbox, liveness: Liveness, stats: TransportStats) -> None:
        self.poller = poller
        self.polled: dict[Any, Link] = {}
        self.backlogged: list[Link] = []
        self.outbox = outbox
        self.liveness = liveness
        self.stats = stats

    def poll_out(self, key: Any, link: Link) -> None:
        """Poll ``key`` (``link``'s socket or descriptor) for room, if not yet (I/O thread)."""
        if key not in self.polled:
            self.polled[key] = link
            self.poller.register(key, zmq.POLLOUT)

    def unpoll(self, key: Any) -> None:
        """Stop polling ``key`` for room, if polled (I/O thread)."""
        if self.polled.pop(key, None) is not None:
            self.poller.unregister(key)

    def moved(self, rank: int, moved: int, accounted_moved: int) -> None:
        """``moved`` messages left for ``rank``, ``accounted_moved`` of them through the outbox."""
        if accounted_moved:
            self.outbox.handed_over(rank, accounted_moved)
        if moved:
            self.liveness.sent_to(rank, time.monotonic())

    def forget_queued(self, rank: int, queue: collections.deque, accounted_at: int) -> int:
        """Empty ``queue`` (messages waiting for ``rank``, whose item ``accounted_at`` says whether
        the outbox counts it); tell the outbox, and return how many it counted."""
        accounted = sum(item[accounted_at] for item in queue)
        queue.clear()
        if accounted:
            self.outbox.handed_over(rank, accounted)
        return accounted


class Link(ABC):
    """One peer's outbound link. ``thread_writes`` and ``thread_bytes``: the messages, and their
    buffer bytes, that threads other than the I/O thread wrote on it themselves."""

    __slots__ = ("rank", "shared", "thread_writes", "thread_bytes")

    def __init__(self, rank: int, shared: LinkShared) -> None:
        self.rank = rank
        self.shared = shared
        self.thread_writes = 0
        self.thread_bytes = 0

    @abstractmethod
    def send(self, frames: list, accounted: bool) -> bool:
        """Send one message or queue it behind earlier ones (I/O thread); False if the link
        refuses it (failed, or dropped). ``accounted``: it came through the outbox, which is told
        when it leaves."""

    @abstractmethod
    def write(self, frames: list, nbytes: int) -> bool:
        """Write one message from the calling thread, any thread, if nothing waits for the peer
        (here or in the outbox): True if it was written or its rest waits here (the I/O thread
        is woken to poll for room); False if it must take the outbox. ``nbytes``: its buffer
        bytes.

        Raises:
            WorkerUnavailableError, TransportError: as :meth:`Outbox.check`.
        """

    @abstractmethod
    def on_writable(self) -> None:
        """Go on sending what waits: the socket became writable (or failed), or a thread left a
        backlog (I/O thread)."""

    @abstractmethod
    def idle(self) -> bool:
        """Whether nothing waits here (what was sent may be overtaken by another link)."""

    @abstractmethod
    def drop(self, close: bool) -> int:
        """The peer is lost: forget what waits (returns how many outbox messages that was).

        ``close``: also close the link now; otherwise it stays open until :meth:`close`, so that
        what was already handed to it (a goodbye acknowledgement) can still leave.
        """

    @abstractmethod
    def close(self) -> None:
        """Close the link (teardown; what the kernel holds still reaches the peer)."""
