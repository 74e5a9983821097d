"""The backward passes of one distributed autograd context on one worker: the pass table.

A pass is *running* here from its first message (or, at the root, its start) until it ends here:
closed by its last task, ended by PASS_END, failed, superseded by a newer pass of the same root,
or dropped with its context. An ended pass's id is remembered, so a late message cannot start it
again. Every change goes through this table, under its own lock.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Protocol, TypeVar

from zgrad.errors import AutogradError

__all__ = ["PassTable", "TablePass"]


class TablePass(Protocol):
    """What the table needs to know of a pass."""

    pass_id: int
    root: int
    is_root: bool

    def ended_here(self) -> None:
        """Called once, when the table ends the pass."""


P = TypeVar("P", bound=TablePass)


class PassTable(Generic[P]):
    """Running passes by id, and the ids of the passes that ended. Thread-safe."""

    def __init__(self, context_id: int) -> None:
        self.context_id = context_id
        self._lock = threading.Lock()
        self._running: dict[int, P] = {}
        self._ended: set[int] = set()

    def open(self, pass_id: int, root: int, make: Callable[[], P]) -> tuple[P, bool]:
        """The running pass ``pass_id``, made with ``make()`` if new; returns it and whether it is new.

        A running pass of the same root with a smaller id is over (a root runs one pass per
        context at a time; its clean-up may still be in flight): it ends.

        Raises:
            AutogradError: the pass already ended here, or another pass of the context runs.
        """
        superseded = []
        with self._lock:
            if pass_id in self._ended:
                raise AutogradError(f"backward pass {pass_id:#x} of autograd context {self.context_id} "
                                    "already ended on this worker")
            state = self._running.get(pass_id)
            if state is not None:
                return state, False
            for older in [p for p in self._running.values() if not p.is_root and p.root == root and p.pass_id < pass_id]:
                del self._running[older.pass_id]
                self._ended.add(older.pass_id)
                superseded.append(older)
            if self._running:
                raise AutogradError(
                    f"another backward pass is already running in autograd context {self.context_id}; "
                    "run one pass per context at a time")
            state = self._running[pass_id] = make()
        for older in superseded:
            older.ended_here()
        return state, True

    def get(self, pass_id: int) -> P | None:
        """The running pass ``pass_id``, or None."""
        with self._lock:
            return self._running.get(pass_id)

    def end(self, pass_id: int) -> bool:
        """End pass ``pass_id`` here (running or not); True if it had not ended before."""
        with self._lock:
            first = pass_id not in self._ended
            state = self._running.pop(pass_id, None)
            self._ended.add(pass_id)
        if state is not None:
            state.ended_here()
        return first

    def end_all(self) -> None:
        """End every running pass (the context is released)."""
        with self._lock:
            states = list(self._running.values())
            self._running.clear()
            self._ended.update(s.pass_id for s in states)
        for state in states:
            state.ended_here()

    def running(self) -> dict[int, P]:
        """A snapshot of the running passes by id."""
        with self._lock:
            return dict(self._running)

    def ended(self) -> set[int]:
        """A snapshot of the ids of the passes that ended here."""
        with self._lock:
            return set(self._ended)

    def __len__(self) -> int:
        with self._lock:
            return len(self._running)
