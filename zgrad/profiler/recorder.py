"""What the profiler records while it runs: a timed event for every op's forward (each built-in
op and user ``autograd.Function``), every node a local backward pass runs, and every
``record_function`` range, in every thread.

Recording costs nothing while no profiler runs: :func:`start` swaps ``Op.apply`` and
``Function.apply`` for timing wrappers and sets the engine's local-pass observer, and
:func:`stop` puts them back. Times are the host's (``time.perf_counter_ns``): an op on the CUDA
backend is timed as long as it takes to queue, as PyTorch's CPU columns do.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from zgrad.autograd.function import Function, Op
from zgrad.engine import graph_task
from zgrad.engine.graph import Node
from zgrad.tensor import Tensor

__all__ = ["Event", "Recording", "start", "stop", "open_range", "close_range"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


class Event:
    """One timed piece of work: ``name``, start and end (ns), the thread it ran in, its input
    shapes (with ``record_shapes``), and the time of the events that ran inside it."""

    __slots__ = ("name", "start_ns", "end_ns", "thread", "input_shapes", "children_ns", "kind", "depth")

    def __init__(self, name: str, start_ns: int, thread: int, kind: str, input_shapes: list | None) -> None:
        self.name, self.start_ns, self.end_ns, self.thread = name, start_ns, start_ns, thread
        self.kind, self.input_shapes, self.children_ns, self.depth = kind, input_shapes, 0, 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def self_ns(self) -> int:
        """The time spent in this event and not in the events inside it."""
        return self.duration_ns - self.children_ns


class Recording:
    """The events of one profiling run, with each thread's stack of open ones."""

    def __init__(self, record_shapes: bool) -> None:
        self.record_shapes = record_shapes
        self.events: list[Event] = []
        self._open = threading.local()

    def stack(self) -> list[Event]:
        opened = getattr(self._open, "events", None)
        if opened is None:
            opened = self._open.events = []
        return opened

    def begin(self, name: str, kind: str, args: tuple = ()) -> Event:
        stack = self.stack()
        shapes = [list(a.shape) if isinstance(a, Tensor) else [] for a in args] if self.record_shapes else None
        event = Event(name, time.perf_counter_ns(), threading.get_ident(), kind, shapes)
        event.depth = len(stack)
        stack.append(event)
        return event

    def end(self, event: Event) -> None:
        event.end_ns = time.perf_counter_ns()
        stack = self.stack()
        while stack and stack.pop() is not event:  # an inner range left open (an exception) closes with it
            pass
        if stack:
            stack[-1].children_ns += event.duration_ns
        self.events.append(event)

    def node_ran(self, node: Node, started_ns: int, ended_ns: int) -> None:
        """The engine's observer: a backward node ran in this thread from ``started_ns`` to ``ended_ns``."""
        event = Event(f"autograd::engine::evaluate_function: {node.name}", started_ns, threading.get_ident(),
                      "backward", [] if self.record_shapes else None)
        event.end_ns = ended_ns
        stack = self.stack()
        event.depth = len(stack)
        if stack:
            stack[-1].children_ns += event.duration_ns
        self.events.append(event)


_active: list[Recording] = []  # the running recording (at most one)
_lock = threading.Lock()
_op_apply = Op.__dict__["apply"]
_function_apply = Function.__dict__["apply"]


def _op_name(cls: type) -> str:
    return "zgrad::" + _CAMEL.sub("_", cls.__name__).lower()


def _timed(original: Any, user: bool) -> classmethod:
    call = original.__func__

    def apply(cls: type, *args: Any) -> Any:
        if not _active:
            return call(cls, *args)
        recording = _active[0]
        event = recording.begin(cls.__name__ if user else _op_name(cls), "user_function" if user else "cpu_op", args)
        try:
            return call(cls, *args)
        finally:
            recording.end(event)

    apply.__doc__ = call.__doc__
    return classmethod(apply)


def start(recording: Recording) -> None:
    """Record into ``recording`` from now on, in every thread.

    Raises:
        RuntimeError: another profiler is running (PyTorch's message).
    """
    with _lock:
        if _active:
            raise RuntimeError("Can't profile: another profiler is already running in this process")
        _active.append(recording)
        Op.apply = _timed(_op_apply, user=False)
        Function.apply = _timed(_function_apply, user=True)
        graph_task.local_pass_observer = recording.node_ran


def stop(recording: Recording) -> None:
    """Stop recording into ``recording`` (nothing if it is not the running one)."""
    with _lock:
        if not _active or _active[0] is not recording:
            return
        _active.clear()
        Op.apply = _op_apply
        Function.apply = _function_apply
        graph_task.local_pass_observer = None


def open_range(name: str) -> Event | None:
    """Begin a ``record_function`` range in the running recording (None when none runs)."""
    return _active[0].begin(name, "user_annotation") if _active else None


def close_range(event: Event | None) -> None:
    """End a range :func:`open_range` began (nothing for None or after the recording stopped)."""
    if event is not None and _active:
        _active[0].end(event)
