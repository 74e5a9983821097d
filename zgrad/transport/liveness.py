"""Peer liveness as explicit state: when each peer was last heard from and last sent to.

Pure bookkeeping with the clock passed in, so it is tested without sockets or sleeps. A peer
is watched from the first valid message it sends; it is silent when nothing valid has arrived
from it for ``heartbeat_timeout_s`` of the time this worker was listening (the I/O loop
reports its own stalls, :meth:`Liveness.stalled`, and decides when silence means lost). A heartbeat goes to a peer only when nothing else
was sent to it for ``heartbeat_interval_s``.
"""

from __future__ import annotations

__all__ = ["Liveness"]


class Liveness:
    """Heartbeat schedule and silence detection for the peers of one worker.

    Args:
        heartbeat_interval_s: longest quiet time on a link before a heartbeat is sent.
        heartbeat_timeout_s: silence after which a watched peer is lost.
    """

    def __init__(self, heartbeat_interval_s: float, heartbeat_timeout_s: float):
        self.heartbeat_interval_s = heartbeat_interval_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self._heard_s: dict[int, float] = {}
        self._sent_s: dict[int, float] = {}
        self._lost: set[int] = set()

    def heard_from(self, rank: int, now_s: float) -> None:
        """Record a valid message from ``rank`` (starts watching it)."""
        if rank not in self._lost:
            self._heard_s[rank] = now_s
            self._sent_s.setdefault(rank, now_s - self.heartbeat_interval_s)

    def sent_to(self, rank: int, now_s: float) -> None:
        """Record that something was sent to ``rank``."""
        if rank in self._sent_s:
            self._sent_s[rank] = now_s

    def heartbeats_due(self, now_s: float) -> list[int]:
        """Return the watched peers that need a heartbeat now."""
        return [r for r, t in self._sent_s.items() if now_s - t >= self.heartbeat_interval_s]

    def silent(self, now_s: float) -> list[tuple[int, float]]:
        """Return ``(rank, silent_s)`` for each watched peer silent past the timeout."""
        return [(r, now_s - t) for r, t in self._heard_s.items() if now_s - t > self.heartbeat_timeout_s]

    def stalled(self, stall_s: float) -> None:
        """This worker did not listen for ``stall_s`` (its process was frozen, or starved by a
        thread that held the GIL): silence in that time says nothing of the peers, so every
        watched peer's clock moves on by it. A peer that died meanwhile is lost one timeout
        after this worker listens again."""
        for rank in self._heard_s:
            self._heard_s[rank] += stall_s

    def lose(self, rank: int) -> None:
        """Stop watching ``rank`` for good."""
        self._lost.add(rank)
        self._heard_s.pop(rank, None)
        self._sent_s.pop(rank, None)

    def next_due_s(self) -> float | None:
        """Return the earliest time at which a heartbeat or an expiry is due, or ``None``."""
        times = [t + self.heartbeat_interval_s for t in self._sent_s.values()]
        times += [t + self.heartbeat_timeout_s for t in self._heard_s.values()]
        return min(times) if times else None
