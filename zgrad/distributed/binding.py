"""Which of this process's live objects of one kind (RPC agents, process-group worlds) a thread
works with.

A process normally runs one worker, so one agent and one world. With the ``inproc`` transport
several workers run as threads of one process: each object is bound to the thread that created
it and to the threads that work for it. A thread bound to none uses the process's only one.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, TypeVar

__all__ = ["ThreadBinding"]

T = TypeVar("T")


class ThreadBinding(Generic[T]):
    """The live objects of one kind in this process and each thread's binding. Thread-safe.

    Args:
        usable: whether a bound object still serves (a closed agent, a destroyed world do not:
            the thread then falls back as if unbound).
    """

    def __init__(self, usable: Callable[[T], bool]) -> None:
        self._usable = usable
        self._lock = threading.Lock()
        self._live: list[T] = []
        self._local = threading.local()

    def bind(self, value: T | None) -> T | None:
        """Bind the calling thread to ``value`` (None unbinds); return its previous binding."""
        previous = getattr(self._local, "value", None)
        self._local.value = value
        return previous

    def bound(self) -> T | None:
        """The calling thread's binding, if any (not the fallback)."""
        return getattr(self._local, "value", None)

    def register(self, value: T, unique: Callable[[list[T]], None] | None = None) -> None:
        """Add ``value`` to the live ones and bind the calling thread to it. ``unique``, called
        with the live ones under the lock, may refuse it by raising."""
        with self._lock:
            if unique is not None:
                unique(list(self._live))
            self._live.append(value)
        self.bind(value)

    def unregister(self, value: T) -> None:
        """Remove ``value`` from the live ones; unbind the calling thread if bound to it."""
        with self._lock:
            if value in self._live:
                self._live.remove(value)
        if self.bound() is value:
            self.bind(None)

    def live(self) -> list[T]:
        with self._lock:
            return list(self._live)

    def current(self) -> tuple[T | None, list[T]]:
        """The calling thread's object: its usable binding, else the process's only live one;
        with the live ones (to explain a None: none live, or several and this thread bound to none)."""
        bound = self.bound()
        if bound is not None and self._usable(bound):
            return bound, []
        live = self.live()
        return (live[0] if len(live) == 1 else None), live
