"""Runs one group's collectives one at a time, in the order they were issued.

Each collective gets the group's next sequence number when it is issued. A synchronous
collective issued while nothing of the group is queued or running runs on the caller's thread
(no hand-off: the latency path); otherwise it is queued and the caller waits for its turn. Async
collectives run on the group's thread, started on first use and stopped by :meth:`close`. One
thread per group, as one rank may interleave async collectives of different groups in an order
another rank does not share.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

__all__ = ["GroupExecutor", "JOIN_TIMEOUT_S"]

JOIN_TIMEOUT_S = 10.0  # close(): how long to wait for the thread to finish its current collective


class GroupExecutor:
    """The issue order and the thread of one group's collectives.

    Args:
        name: the thread's name.
        on_thread_start: called first on the group's thread (binds it to its process group).
    """

    def __init__(self, name: str, on_thread_start: Callable[[], None]) -> None:
        self._name = name
        self._on_thread_start = on_thread_start
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: collections.deque[Callable[[], None]] = collections.deque()
        self._busy = False
        self._next_seq = 1
        self._thread: threading.Thread | None = None
        self._closed = False

    def issue(self, make_job: Callable[[int], Callable[[], None]], inline: bool) -> int | None:
        """Take the next sequence number: with ``inline`` and nothing of the group queued or
        running, return it (the caller runs the collective now, then calls :meth:`done_inline`);
        else queue the job ``make_job(seq)`` returns and return None. Never blocks.

        Raises:
            RuntimeError: the executor is closed.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name}: the process group was destroyed")
            seq = self._next_seq
            self._next_seq += 1
            if inline and not self._busy and not self._queue:
                self._busy = True
                return seq
            self._queue.append(make_job(seq))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify()
            return None

    def done_inline(self) -> None:
        """The job :meth:`issue` returned has finished (on the caller's thread)."""
        with self._lock:
            self._busy = False
            self._changed.notify()

    def _run(self) -> None:
        self._on_thread_start()
        while True:
            with self._lock:
                while self._busy or (not self._queue and not self._closed):
                    self._changed.wait()
                if not self._queue:
                    return  # closed and drained
                job = self._queue.popleft()
                self._busy = True
            try:
                job()
            finally:
                with self._lock:
                    self._busy = False

    def close(self) -> None:
        """Run what is queued, then stop the thread (waits at most ``JOIN_TIMEOUT_S``)."""
        with self._lock:
            self._closed = True
            self._changed.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT_S)
