"""State of one distributed backward pass on one worker, and of the activations that run it.

An *activation* is one run of the local graph task, started by the root's ``backward`` or by a
gradient message arriving for a send node. It runs ready nodes in its thread until none is
ready; the gradient messages its recv nodes send are counted against it, and it is *done* when
its run has ended and every one of those messages has been acknowledged (or when anything
failed). Only then is the message that started it acknowledged. So when the root's activation
is done, all work of the pass, everywhere, has finished: every piece of work descends from an
unacknowledged message.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from zgrad.engine.context import DistAutogradContext
from zgrad.engine.graph_task import GraphTask

__all__ = ["PassState", "Activation", "Completion"]


class PassState:
    """One pass of one context on this worker."""

    def __init__(self, ctx: DistAutogradContext, pass_id: int, root: int, retain_graph: bool, mode: str) -> None:
        self.ctx = ctx
        self.pass_id = pass_id
        self.root = root
        self.retain_graph = retain_graph
        self.mode = mode
        self.task = GraphTask(retain_graph=retain_graph, leaf_sink=ctx.accumulate_grad)
        self.root_edges: list = []
        self.executed_sends: set[int] = set()
        self.participants: set[int] = set()
        self.lock = threading.Lock()
        self.progress = 0
        self.failed: str | None = None
        self.smart: Any = None  # SMART mode's discovery state

    def touch(self) -> None:
        self.progress += 1

    def unexecuted_sends(self, among: list | None = None) -> list[list[int]]:
        """``[autograd_message_id, peer]`` of the sends that never received a gradient in this pass."""
        sends = self.ctx.sends() if among is None else among
        return [[s.autograd_message_id, s.peer] for s in sends if s.autograd_message_id not in self.executed_sends]


DoneCallback = Callable[[str | None, set[int]], None]


class Activation:
    """One run of a pass's graph task and the gradient messages it sent."""

    def __init__(self, state: PassState, on_done: DoneCallback) -> None:
        self.state = state
        self._on_done = on_done
        self._lock = threading.Lock()
        self._outstanding = 0
        self._running = True
        self._error: str | None = None
        self._finished = False
        self.participants: set[int] = set()

    def message_sent(self, dst: int) -> None:
        with self._lock:
            self._outstanding += 1
            self.participants.add(dst)

    def message_acked(self, error: str | None, participants: set[int]) -> None:
        with self._lock:
            self._outstanding -= 1
            self.participants |= participants
            if error is not None and self._error is None:
                self._error = error
        self._maybe_done()

    def run_ended(self, error: str | None) -> None:
        with self._lock:
            self._running = False
            if error is not None and self._error is None:
                self._error = error
        self._maybe_done()

    def _maybe_done(self) -> None:
        with self._lock:
            if self._finished:
                return
            if self._error is None and (self._running or self._outstanding):
                return
            if self._error is not None and self._running:
                return  # the run's own end reports once it unwinds
            self._finished = True
            error, participants = self._error, set(self.participants)
        self._on_done(error, participants)


class Completion:
    """The outcome of a pass at its root: a value or an error, set once; thread-safe waits."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._error: BaseException | None = None

    def set_done(self, error: BaseException | None = None) -> bool:
        if self._event.is_set():
            return False
        self._error = error
        self._event.set()
        return True

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float | None) -> bool:
        """Block until done (at most ``timeout_s``); True when done."""
        return self._event.wait(timeout_s)

    def result(self) -> None:
        """Raise the pass's error, if it failed."""
        if self._error is not None:
            raise self._error
