"""The callee pool: runs incoming calls and engine work, and never deadlocks on nested RPCs.

A fixed number of core threads (``[rpc] num_worker_threads``) take tasks from one queue. A call
may itself make RPCs and wait for them; when a pool thread blocks in such a wait while tasks are
queued and no thread is idle, the pool starts a compensating thread (up to ``max_threads``), so
a chain or recursion deeper than the pool still progresses. Compensating threads exit when idle.
Where the pool sits among a worker's threads: ``docs/architecture.md``, Threading model.

The hand-off is a ``queue.SimpleQueue``: a submit wakes exactly one idle thread, inside C, with
no Python-level condition variable (waking every idle thread per task cost more than the task
on a small machine). The counters that drive compensation sit behind their own lock.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Callable

from zgrad.futures import blocking_hooks

__all__ = ["CalleePool"]

log = logging.getLogger("zgrad.rpc")

Task = Callable[[], Any]
_STOP = object()


class CalleePool:
    """A growable thread pool. ``submit`` never blocks; ``close`` stops every thread it started.

    Args:
        name: prefix of the thread names.
        num_threads: core threads, always alive until close.
        max_threads: ceiling including compensating threads.
        on_thread_start: called first in every pool thread (e.g. to bind the RPC agent to it).
        idle_exit_s: how long a compensating thread waits for work before it exits.
    """

    def __init__(self, name: str, num_threads: int, max_threads: int = 1024,
                 on_thread_start: Callable[[], None] | None = None, idle_exit_s: float = 5.0) -> None:
        self._name = name
        self._core = num_threads
        self._max = max(max_threads, num_threads)
        self._on_thread_start = on_thread_start
        self._idle_exit_s = idle_exit_s
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._quiet = threading.Condition(self._lock)  # notified when nothing is queued or running
        self._threads: set[threading.Thread] = set()
        self._queued = 0
        self._idle = 0
        self._blocked = 0
        self._running = 0
        self._quiet_waiters = 0
        self._closed = False
        self._serial = 0
        self.peak_threads = 0

    def start(self) -> None:
        with self._lock:
            for _ in range(self._core):
                self._spawn(core=True)

    def _spawn(self, core: bool) -> None:
        self._serial += 1
        thread = threading.Thread(target=self._work, args=(core,), name=f"{self._name}-{self._serial}", daemon=True)
        self._threads.add(thread)
        self.peak_threads = max(self.peak_threads, len(self._threads))
        thread.start()

    def _starved(self) -> bool:
        """Tasks wait, nobody idle takes them, and some thread is blocked in a nested wait (lock held)."""
        return self._queued > self._idle and self._blocked > 0 and len(self._threads) < self._max

    def submit(self, task: Task) -> None:
        """Queue ``task``; it runs on a pool thread. Silently dropped after :meth:`close`."""
        with self._lock:
            if self._closed:
                return
            self._queued += 1
            if self._starved():
                self._spawn(core=False)
        self._tasks.put(task)

    def in_flight(self) -> int:
        """Tasks queued or running."""
        with self._lock:
            return self._queued + self._running

    def _block_enter(self) -> None:
        with self._lock:
            self._blocked += 1
            if self._starved():
                self._spawn(core=False)

    def _block_exit(self) -> None:
        with self._lock:
            self._blocked -= 1

    def _next_task(self, core: bool) -> Task | None:
        """Wait for the next task; None when this thread should exit."""
        with self._lock:
            self._idle += 1
        try:
            task = self._tasks.get(timeout=None if core else self._idle_exit_s)
        except queue.Empty:
            task = None
        with self._lock:
            self._idle -= 1
            if task is None:
                # Timed out: exit unless a task slipped in between the timeout and here.
                return None if self._queued == 0 or self._closed else self._next_task(core)
            if task is _STOP or self._closed:
                return None
            self._queued -= 1
            self._running += 1
            return task

    def _work(self, core: bool) -> None:
        blocking_hooks.enter = self._block_enter
        blocking_hooks.exit = self._block_exit
        if self._on_thread_start is not None:
            self._on_thread_start()
        me = threading.current_thread()
        try:
            while (task := self._next_task(core)) is not None:
                try:
                    task()
                except BaseException:  # noqa: BLE001 - a task's failure must not kill the pool
                    log.exception("a task on %s raised", me.name)
                finally:
                    del task
                    with self._lock:
                        self._running -= 1
                        if self._quiet_waiters and not self._running and not self._queued:
                            self._quiet.notify_all()
        finally:
            with self._lock:
                self._threads.discard(me)

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until no task is queued or running, at most ``timeout_s``; True if idle."""
        with self._lock:
            self._quiet_waiters += 1
            try:
                return self._quiet.wait_for(lambda: not self._queued and not self._running, timeout_s)
            finally:
                self._quiet_waiters -= 1

    def close(self, timeout_s: float = 5.0) -> None:
        """Drop queued tasks, wake every thread and join them (bounded by ``timeout_s`` in all)."""
        with self._lock:
            self._closed = True
            self._queued = 0
            threads = list(self._threads)
            self._quiet.notify_all()
        for _ in threads:
            self._tasks.put(_STOP)
        current = threading.current_thread()
        deadline = time.monotonic() + timeout_s
        for thread in threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
