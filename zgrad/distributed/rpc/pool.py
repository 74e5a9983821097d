"""The callee pool: runs incoming calls and engine work, and never deadlocks on nested RPCs.

A fixed number of core threads (``[rpc] num_worker_threads``) take tasks from one queue. A call
may itself make RPCs and wait for them; when a pool thread blocks in such a wait while tasks are
queued and no thread is idle, the pool starts a compensating thread (up to ``max_threads``), so
a chain or recursion deeper than the pool still progresses. Compensating threads exit when idle.
This is the "grow it" choice of ARCHITECTURE.md's threading model.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any, Callable

from zgrad.distributed.rpc.futures import blocking_hooks

__all__ = ["CalleePool"]

log = logging.getLogger("zgrad.rpc")

Task = Callable[[], Any]


class CalleePool:
    """A growable thread pool. ``submit`` never blocks; ``close`` stops every thread it started.

    Args:
        name: prefix of the thread names.
        num_threads: core threads, always alive until close.
        max_threads: ceiling including compensating threads.
        on_thread_start: called first in every pool thread (e.g. to bind the RPC agent to it).
    """

    def __init__(self, name: str, num_threads: int, max_threads: int = 1024,
                 on_thread_start: Callable[[], None] | None = None, idle_exit_s: float = 5.0) -> None:
        self._name = name
        self._core = num_threads
        self._max = max(max_threads, num_threads)
        self._on_thread_start = on_thread_start
        self._idle_exit_s = idle_exit_s
        self._cond = threading.Condition()
        self._tasks: deque[Task] = deque()
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._blocked = 0
        self._running = 0
        self._closed = False
        self._serial = 0
        self.peak_threads = 0

    def start(self) -> None:
        with self._cond:
            for _ in range(self._core):
                self._spawn(core=True)

    def _spawn(self, core: bool) -> None:
        self._serial += 1
        thread = threading.Thread(target=self._work, args=(core,), name=f"{self._name}-{self._serial}", daemon=True)
        self._threads.add(thread)
        self.peak_threads = max(self.peak_threads, len(self._threads))
        thread.start()

    def submit(self, task: Task) -> None:
        """Queue ``task``; it runs on a pool thread. Silently dropped after :meth:`close`."""
        with self._cond:
            if self._closed:
                return
            self._tasks.append(task)
            if self._idle == 0 and self._blocked > 0 and len(self._threads) < self._max:
                self._spawn(core=False)
            self._cond.notify()

    def in_flight(self) -> int:
        """Tasks queued or running."""
        with self._cond:
            return len(self._tasks) + self._running

    def _block_enter(self) -> None:
        with self._cond:
            self._blocked += 1
            if self._tasks and self._idle == 0 and len(self._threads) < self._max:
                self._spawn(core=False)

    def _block_exit(self) -> None:
        with self._cond:
            self._blocked -= 1

    def _work(self, core: bool) -> None:
        blocking_hooks.enter = self._block_enter
        blocking_hooks.exit = self._block_exit
        if self._on_thread_start is not None:
            self._on_thread_start()
        me = threading.current_thread()
        try:
            while True:
                with self._cond:
                    while not self._tasks and not self._closed:
                        self._idle += 1
                        notified = self._cond.wait(None if core else self._idle_exit_s)
                        self._idle -= 1
                        if not notified and not core and not self._tasks:
                            return
                    if self._closed:
                        return
                    task = self._tasks.popleft()
                    self._running += 1
                try:
                    task()
                except BaseException:  # noqa: BLE001 - a task's failure must not kill the pool
                    log.exception("a task on %s raised", me.name)
                finally:
                    with self._cond:
                        self._running -= 1
                        self._cond.notify_all()
        finally:
            with self._cond:
                self._threads.discard(me)
                self._cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until no task is queued or running, at most ``timeout_s``; True if idle."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._tasks and self._running == 0, timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        """Drop queued tasks, wake every thread and join them (bounded by ``timeout_s`` in all)."""
        with self._cond:
            self._closed = True
            self._tasks.clear()
            self._cond.notify_all()
            threads = list(self._threads)
        current = threading.current_thread()
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
