"""One group on this rank: its members, its inbound messages by sequence number, its failure.

Collectives of a group run one at a time, in sequence-number order, on every rank. The mesh's
I/O thread hands each DATA message to :meth:`GroupState.deliver`: a message of the running
collective goes straight to its queue (where the running thread waits), one of a later
collective waits in a stash until that collective begins, one of a finished collective is late
(dropped, unless its fingerprint shows the ranks disagreed about that collective).

A failure (mismatch, timeout, lost peer, an ABORT from another rank) is sticky: the running
collective and every later one fail with it, as NCCL's aborted communicators do. A member that
closed its mesh (``destroy_process_group``) is not a failure: it said goodbye after everything it
sent had arrived, so a collective fails only if it still waits for that member (the member may
well have finished its part of it and left).
"""

from __future__ import annotations

import queue
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

from zgrad.distributed.collectives.fingerprint import Fingerprint
from zgrad.errors import CollectiveError, WorkerUnavailableError

__all__ = ["GroupState", "Inbound", "FAILED", "DEPARTED", "mismatch_error"]

# Fingerprints of finished collectives kept to judge late messages.
_DONE_KEPT = 64
# Messages of collectives not begun yet that one group holds at most (more are dropped).
MAX_STASHED = 1 << 16

FAILED = object()  # put in the running collective's queue when the group fails
DEPARTED = object()  # put there when a member closed its mesh (it may have sent all it had to)


class Inbound(NamedTuple):
    """A checked DATA message: sender's group rank, tag, fingerprint, payload buffers."""

    src: int
    tag: int
    fingerprint: Fingerprint
    buffers: tuple[memoryview, ...]


def mismatch_error(group: str, seq: int, me: int, mine: Fingerprint, peer: int, theirs: Fingerprint) -> CollectiveError:
    """The error every rank raises when ranks ``me`` and ``peer`` (global ranks) disagree."""
    low, high = sorted((me, peer))
    return CollectiveError(
        f"Detected mismatch between collectives on ranks {low} and {high} of group {group}: rank {me} is running "
        f"collective: {mine.describe(seq)}, but rank {peer} is running collective: {theirs.describe(seq)}. Every rank "
        "of a group must call the same collectives, with tensors of the same shape and dtype, in the same order")


class GroupState:
    """Members and inbound traffic of one group on this rank. Thread-safe.

    Args:
        group_id: the group's id (0 is the world; ``new_group`` calls number the others).
        ranks: the members' global ranks, sorted; group rank ``i`` is ``ranks[i]``.
        my_rank: this process's global rank (a member).
        name: for messages ("WORLD", "group 3").
    """

    def __init__(self, group_id: int, ranks: tuple[int, ...], my_rank: int, name: str) -> None:
        self.id = group_id
        self.ranks = ranks
        self.rank = ranks.index(my_rank)
        self.size = len(ranks)
        self.name = name
        self.group_rank_of = {g: i for i, g in enumerate(ranks)}
        self._lock = threading.Lock()
        self._news = threading.Condition(self._lock)  # a failure or a departure was recorded
        self._running = 0
        self._queue: queue.SimpleQueue | None = None
        self._last_done = 0
        self._stash: dict[int, list[Inbound]] = {}
        self._stashed = 0
        self._done: OrderedDict[int, Fingerprint] = OrderedDict()
        self._departed: dict[int, str] = {}  # group rank -> why, for members that closed their mesh
        self.failure: BaseException | None = None

    def deliver(self, seq: int, message: Inbound) -> "str | CollectiveError | None":
        """Route a DATA message (the mesh's I/O thread). Returns None when it was taken, a reason
        when it was dropped, or the mismatch error a late message revealed (the caller fails the
        group with it)."""
        with self._lock:
            if self.failure is not None:
                return "group_failed"
            if seq == self._running:
                self._queue.put(message)
                return None
            if seq > self._running and seq > self._last_done:
                if self._stashed >= MAX_STASHED:
                    return "stash_full"
                self._stash.setdefault(seq, []).append(message)
                self._stashed += 1
                return None
            mine = self._done.get(seq)
        if mine is not None and mine != message.fingerprint:
            return mismatch_error(self.name, seq, self.ranks[self.rank], mine, self.ranks[message.src], message.fingerprint)
        return "late"

    def begin(self, seq: int) -> queue.SimpleQueue:
        """Start collective ``seq``: returns the queue its messages arrive in (stashed ones first).

        Raises:
            BaseException: the group's failure, if it failed.
        """
        with self._lock:
            if self.failure is not None:
                raise self.failure
            inbox: queue.SimpleQueue = queue.SimpleQueue()
            for message in self._stash.pop(seq, ()):
                inbox.put(message)
                self._stashed -= 1
            self._running, self._queue = seq, inbox
            return inbox

    def end(self, seq: int, fingerprint: Fingerprint) -> None:
        """Collective ``seq`` finished here (successfully or not)."""
        with self._lock:
            if self._running == seq:
                self._running, self._queue = 0, None
            self._last_done = max(self._last_done, seq)
            self._done[seq] = fingerprint
            while len(self._done) > _DONE_KEPT:
                self._done.popitem(last=False)

    def fail(self, error: BaseException) -> bool:
        """Make ``error`` the group's failure unless it has one; wake the running collective.
        Returns whether this was the first failure."""
        with self._lock:
            if self.failure is not None:
                return False
            self.failure = error
            self._stash.clear()
            self._stashed = 0
            inbox = self._queue
            self._news.notify_all()
        if inbox is not None:
            inbox.put(FAILED)
        return True

    def depart(self, rank: int, reason: str) -> None:
        """Global ``rank`` closed its mesh (the mesh's I/O thread, after its last message)."""
        with self._lock:
            self._departed[self.group_rank_of[rank]] = reason
            inbox = self._queue
            self._news.notify_all()
        if inbox is not None:
            inbox.put(DEPARTED)

    def await_news_of(self, ranks: Any, timeout_s: float) -> None:
        """Wait until the group has failed or every group rank in ``ranks`` has departed, at most
        ``timeout_s``."""
        with self._news:
            self._news.wait_for(lambda: self.failure is not None or all(r in self._departed for r in ranks),
                                max(timeout_s, 0.0))

    def departed_among(self, ranks: Any) -> list[int]:
        """The group ranks among ``ranks`` that closed their mesh."""
        departed = self._departed
        return [r for r in ranks if r in departed] if departed else []

    def departure_error(self, ranks: list[int]) -> WorkerUnavailableError:
        names = ", ".join(str(self.ranks[r]) for r in ranks)
        return WorkerUnavailableError(
            f"rank(s) {names} of group {self.name} left (destroyed the process group: {self._departed[ranks[0]]}) before "
            "sending what this collective waits for: every rank must run the same collectives before it leaves")

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {"ranks": list(self.ranks), "running": self._running, "last_done": self._last_done,
                    "stashed": self._stashed, "failed": self.failure is not None}
