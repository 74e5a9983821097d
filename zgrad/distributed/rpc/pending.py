"""The calls in flight of one worker's caller side, and the workers it knows are lost.

One lock guards the table of calls in flight, the lost workers and the closed flag, so that no
request is registered after the agent closed (closing takes the table) or to a worker already
lost (losing one takes its calls). Any thread: a caller registers its request and forgets it
once answered; whichever thread completes a future (the one handling the reply, the timer
thread, the I/O thread on a peer's loss, the thread closing the agent) takes it out.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from zgrad.distributed.rpc.timer import DeadlineTimer
from zgrad.errors import ZgradError
from zgrad.futures import Future

__all__ = ["CallsInFlight", "DirectCall", "Pending"]


class Pending:
    """A call in flight. ``future`` is None for a caller-direct one (its thread waits for the reply)."""

    __slots__ = ("future", "dst", "what", "timer", "decode", "context", "pins")

    def __init__(self, future: Future | None, dst: int, what: str, decode: bool, context: int | None,
                 pins: list | None = None) -> None:
        self.future, self.dst, self.what, self.decode, self.context = future, dst, what, decode, context
        self.timer: int | None = None
        self.pins = pins  # RRefs sent to their owner in this call, kept alive until it is answered


class DirectCall:
    """A call started by :meth:`Caller.start_call`, for :meth:`Caller.collect`."""

    __slots__ = ("dst", "what", "meta", "pins", "deadline_s", "request_id", "value", "error", "finished")

    def __init__(self, dst: int, what: str, meta: dict[str, Any], pins: list, deadline_s: float | None) -> None:
        self.dst, self.what, self.meta, self.pins, self.deadline_s = dst, what, meta, pins, deadline_s
        self.request_id = 0
        self.value: Any = None
        self.error: BaseException | None = None
        self.finished = False


class CallsInFlight:
    """The calls of one worker that await their reply, by request id. Thread-safe.

    ``dead`` (rank -> why it was lost) and ``closed`` change under the lock only; a waiting
    caller may read them without it (a dict lookup and an attribute read are atomic).
    """

    def __init__(self, name: str, timer: DeadlineTimer) -> None:
        self._name = name
        self._timer = timer  # where the timeouts of calls with a future are scheduled
        self._lock = threading.Lock()
        self._no_pending = threading.Condition(self._lock)
        self._no_pending_waiters = 0  # threads in wait_empty (the last call out wakes them)
        self._request_ids = itertools.count(1)
        self._pending: dict[int, Pending] = {}
        self.dead: dict[int, str] = {}
        self.closed = False

    def next_id(self) -> int:
        """A request id unique on this worker."""
        return next(self._request_ids)

    def add(self, dst: int, pending: Pending) -> tuple[int, str | None]:
        """Register ``pending`` under a new request id, unless ``dst`` is lost; return the id and
        why ``dst`` was lost (None when it was not, and ``pending`` is registered).

        Raises:
            ZgradError: the agent is shut down.
        """
        request_id = next(self._request_ids)
        with self._lock:
            if self.closed:
                raise ZgradError(f"RPC agent of {self._name!r} is shut down; call init_rpc again")
            dead = self.dead.get(dst)
            if dead is None:
                self._pending[request_id] = pending
        return request_id, dead

    def get(self, request_id: int) -> Pending | None:
        with self._lock:
            return self._pending.get(request_id)

    def pop(self, request_id: int) -> Pending | None:
        """Take the call out (None if it is no longer in flight); the last one out wakes :meth:`wait_empty`."""
        with self._lock:
            pending = self._pending.pop(request_id, None)
            if not self._pending and self._no_pending_waiters:
                self._no_pending.notify_all()
        return pending

    def finish(self, request_id: int, value: Any = None, error: BaseException | None = None) -> None:
        """Take out a call with a future and complete it with ``value`` or ``error`` (nothing if
        it is no longer in flight). Runs the future's callbacks on the calling thread."""
        pending = self.pop(request_id)
        if pending is None:
            return
        if pending.timer is not None:
            self._timer.cancel(pending.timer)
        # Let go of the pinned RRefs first: whoever waits on the future then finds the deletes
        # of those nobody else holds already sent, ahead of anything it sends next.
        pending.pins = None
        if error is not None:
            pending.future.set_exception(error)
        else:
            pending.future.set_result(value)

    def lose(self, rank: int, reason: str) -> list[int]:
        """Worker ``rank`` is lost (no call to it registers from now on); return the ids of the
        calls to it that have a future to fail."""
        with self._lock:
            self.dead[rank] = reason
            return [rid for rid, p in self._pending.items() if p.dst == rank and p.future is not None]

    def close(self) -> list[Pending] | None:
        """No call registers from now on; take every call in flight (None if closed already)."""
        with self._lock:
            if self.closed:
                return None
            self.closed = True
            pending, self._pending = self._pending, {}
        return list(pending.values())

    def dead_workers(self) -> dict[int, str]:
        with self._lock:
            return dict(self.dead)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def in_context(self, dst: int, context_id: int) -> bool:
        """Whether a call to ``dst`` made in autograd context ``context_id`` is in flight."""
        with self._lock:
            return any(p.dst == dst and p.context == context_id for p in self._pending.values())

    def wait_empty(self, timeout_s: float | None) -> bool:
        """Block until no call is in flight (at most ``timeout_s``; None: no bound)."""
        with self._no_pending:
            self._no_pending_waiters += 1
            try:
                return self._no_pending.wait_for(lambda: not self._pending, timeout_s)
            finally:
                self._no_pending_waiters -= 1
