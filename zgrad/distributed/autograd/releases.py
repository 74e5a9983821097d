"""Context releases that wait for the next call to their worker and ride in it.

When a context is released, every worker it reached releases it too. A CONTEXT_RELEASE of its own
and its answer cost two messages per worker and context: in a training loop that is as many
messages as the step's forward call, and their handling competes with the next step for the
CPU. So a release waits here, per worker, for the next CALL or RREF fetch this worker sends
there, and rides in its metadata (``"released": [context ids]``): the receiver releases those
contexts before it runs the call, and passes each on the same way. A release that finds no call
to ride within :data:`RELEASE_DELAY_S` goes out as a CONTEXT_RELEASE of its own (a flush), and
``rpc.shutdown`` sends those still waiting on the worker that calls it (``drain``). A call that
fails at the caller without an answer (refused before it left, e.g. over ``max_message_mb``; its
peer lost; timed out) sends what rode in it as CONTEXT_RELEASE (``CallHooks.call_failed``): a
release that did arrive is a no-op the second time.

A release waits only where it cannot overtake a message of its own context to that worker: a
call of the context still in flight there (an ``rpc_async`` nobody waited for) may travel on
another connection than the next call, so such a release goes out at once, ordered behind it on
the link. Engine messages of the context that are still in flight (a failed pass's gradients)
may be overtaken: a released context stays released there, and the late message is refused.
"""

from __future__ import annotations

import threading

from zgrad.errors import ProtocolError

__all__ = ["PendingReleases", "RELEASE_DELAY_S", "RELEASED_KEY", "released_ids"]

RELEASE_DELAY_S = 0.05
RELEASED_KEY = "released"  # the metadata key of the context ids riding in a CALL or RREF fetch


class PendingReleases:
    """The releases waiting, per worker, for a call to ride in. Thread-safe.

    The owner arms one flush at a time: :meth:`add` says when a flush must be scheduled, and
    :meth:`take_due` (the flush) says when the next one is due, if anything still waits.
    """

    def __init__(self, delay_s: float | None = None) -> None:
        self.delay_s = RELEASE_DELAY_S if delay_s is None else delay_s
        self._lock = threading.Lock()
        self._waiting: dict[int, list[tuple[int, float]]] = {}  # worker -> [(context id, since)]
        self._armed = False

    def __len__(self) -> int:
        with self._lock:
            return sum(len(entries) for entries in self._waiting.values())

    def add(self, dst: int, context_id: int, now_s: float) -> bool:
        """Let the release of ``context_id`` on ``dst`` wait; True when a flush must be scheduled
        (``delay_s`` from now)."""
        with self._lock:
            self._waiting.setdefault(dst, []).append((context_id, now_s))
            if self._armed:
                return False
            self._armed = True
            return True

    def take(self, dst: int) -> list[int]:
        """The context ids waiting for ``dst``, now on their way (empty if none)."""
        if dst not in self._waiting:  # the common case, without the lock (a dict lookup is atomic)
            return []
        with self._lock:
            entries = self._waiting.pop(dst, ())
        return [context_id for context_id, _ in entries]

    def take_due(self, now_s: float) -> tuple[list[tuple[int, int]], float | None]:
        """The flush: the releases that waited ``delay_s`` or longer (``(worker, context id)``
        each), and in how many seconds the next flush is due (None: nothing waits, disarmed)."""
        due: list[tuple[int, int]] = []
        oldest_s = None
        with self._lock:
            for dst in list(self._waiting):
                entries = self._waiting[dst]
                keep = []
                for context_id, since_s in entries:
                    if now_s - since_s >= self.delay_s:
                        due.append((dst, context_id))
                    else:
                        keep.append((context_id, since_s))
                        oldest_s = since_s if oldest_s is None else min(oldest_s, since_s)
                if keep:
                    self._waiting[dst] = keep
                else:
                    del self._waiting[dst]
            self._armed = oldest_s is not None
        return due, None if oldest_s is None else max(oldest_s + self.delay_s - now_s, 0.0)

    def take_all(self) -> list[tuple[int, int]]:
        """Every waiting release (``(worker, context id)`` each), now on its way."""
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        return [(dst, context_id) for dst, entries in waiting.items() for context_id, _ in entries]


def released_ids(value: object) -> list[int]:
    """The context ids of a received ``"released"`` entry.

    Raises:
        ProtocolError: not a list of ints.
    """
    if type(value) is not list or not all(type(v) is int for v in value):
        raise ProtocolError(f"metadata key {RELEASED_KEY!r} must be a list of autograd context ids")
    return value
