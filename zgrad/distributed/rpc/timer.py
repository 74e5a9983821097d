"""One thread that fires callbacks at deadlines (RPC timeouts), owned and stopped by the agent."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

__all__ = ["DeadlineTimer"]

log = logging.getLogger("zgrad.rpc")

_COMPACT_MIN = 1024  # heap entries below which cancelled ones are left for the timer thread


class DeadlineTimer:
    """Runs ``callback()`` once ``time.monotonic()`` passes its deadline, unless cancelled first.

    Callbacks run on the timer's thread: keep them short (completing a future is).
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"{self._name}-timer", daemon=True)
        self._thread.start()

    def schedule(self, delay_s: float, callback: Callable[[], None]) -> int:
        """Run ``callback`` after ``delay_s`` seconds; returns a handle for :meth:`cancel`."""
        handle = next(self._ids)
        with self._cond:
            self._callbacks[handle] = callback
            heapq.heappush(self._heap, (time.monotonic() + delay_s, handle))
            if self._heap[0][1] == handle:
                self._cond.notify()
        return handle

    def cancel(self, handle: int) -> None:
        """Forget a scheduled callback (no effect if it already ran)."""
        with self._cond:
            if self._callbacks.pop(handle, None) is not None and len(self._heap) > _COMPACT_MIN \
                    and len(self._heap) > 2 * len(self._callbacks):
                # Cancelled entries stay in the heap until their deadline; at thousands of calls
                # per second and a 60 s timeout that is a lot of memory, so drop them in bulk.
                self._heap = [entry for entry in self._heap if entry[1] in self._callbacks]
                heapq.heapify(self._heap)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    while self._heap and self._heap[0][1] not in self._callbacks:
                        heapq.heappop(self._heap)
                    if self._heap and self._heap[0][0] <= time.monotonic():
                        break
                    self._cond.wait(None if not self._heap else self._heap[0][0] - time.monotonic())
                if self._stopped:
                    return
                _, handle = heapq.heappop(self._heap)
                callback = self._callbacks.pop(handle)
            try:
                callback()
            except Exception:  # noqa: BLE001 - one failing callback must not stop the timer
                log.exception("a deadline callback raised")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the thread without running what is still scheduled."""
        with self._cond:
            self._stopped = True
            self._callbacks.clear()
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
