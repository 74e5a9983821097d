"""``zgrad.profiler``, as ``torch.profiler``: time every op, backward node and
``record_function`` range of a block, and read the result as PyTorch's table or a Chrome trace.

    with zgrad.profiler.profile(record_shapes=True) as prof:
        with zgrad.profiler.record_function("model_inference"):
            model(inputs)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))

Op names are ``zgrad::<op>`` (PyTorch's are ``aten::<op>``); backward nodes are
``autograd::engine::evaluate_function: <Node>`` as PyTorch's. zgrad times the host only: with
``ProfilerActivity.CUDA`` the CUDA columns stay empty, and an op on the GPU counts the time it
took to queue. ``profile_memory``, ``with_stack``, ``with_flops`` and ``with_modules`` are
accepted and record nothing more.
"""

from __future__ import annotations

import enum
import functools
import os
import socket
import time
import warnings
from typing import Any, Callable, Iterable

from zgrad.profiler import recorder
from zgrad.profiler.events import EventList, FunctionEventAvg

__all__ = ["profile", "record_function", "schedule", "ProfilerAction", "ProfilerActivity", "supported_activities",
           "tensorboard_trace_handler", "EventList", "FunctionEventAvg"]


class ProfilerActivity(enum.Enum):
    """What to profile (PyTorch's): zgrad records the host (``CPU``) whichever are asked."""

    CPU = 0
    CUDA = 2
    XPU = 1
    MTIA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What a :func:`schedule` says to do at a step (PyTorch's)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities() -> set[ProfilerActivity]:
    """The activities zgrad records: the host's."""
    return {ProfilerActivity.CPU}


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """PyTorch's schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle, ``warmup`` and
    ``active`` recorded steps (the last one saved), ``repeat`` times (0: for ever).

    Raises:
        ValueError: negative counts, or ``active`` < 1 (PyTorch's message).
    """
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results", UserWarning, stacklevel=2)

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:  # the first cycle starts at its warmup
            step += wait
        length = wait + warmup + active
        if repeat > 0 and step // length >= repeat:
            return ProfilerAction.NONE
        position = step % length
        if position < wait:
            return ProfilerAction.NONE
        if position < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if position < length - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class record_function:  # noqa: N801 - PyTorch's name
    """A named range in the profile, as ``torch.profiler.record_function``: a context manager, or
    a decorator of a function. Costs next to nothing when no profiler runs."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name, self.args = name, args
        self._event: recorder.Event | None = None

    def __enter__(self) -> "record_function":
        self._event = recorder.open_range(self.name)
        return self

    def __exit__(self, *exc: Any) -> None:
        recorder.close_range(self._event)
        self._event = None

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def ranged(*args: Any, **kwargs: Any) -> Any:
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return ranged


class profile:  # noqa: N801 - PyTorch's name
    """Profile a block, as ``torch.profiler.profile``: a context manager (or ``start``/``stop``),
    with ``step()`` to move a ``schedule`` on and ``on_trace_ready(prof)`` called at the end of
    each recorded cycle. ``key_averages()``, ``events()`` and ``export_chrome_trace(path)`` read
    the last one.

    Raises:
        RuntimeError: another profiler is running.
    """

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[["profile"], Any] | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Any = None, execution_trace_observer: Any = None,
                 acc_events: bool = False, use_cuda: bool | None = None, custom_trace_id_callback: Any = None) -> None:
        self.activities = set(activities) if activities is not None else supported_activities()
        self.schedule = schedule or _always
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory, self.with_stack, self.with_flops, self.with_modules = (profile_memory, with_stack,
                                                                                      with_flops, with_modules)
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._recording: recorder.Recording | None = None
        self._step_range: recorder.Event | None = None
        self._events = EventList()

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        """Begin: the schedule's action for step 0 decides whether this step is recorded."""
        self.step_num = 0
        self._enter_action(self.schedule(0))

    def stop(self) -> None:
        """End: a cycle being recorded is finished (and handed to ``on_trace_ready``)."""
        if self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._finish_cycle()
        self._stop_recording()
        self._action = ProfilerAction.NONE

    def step(self) -> None:
        """Mark the end of a training step: move the schedule on."""
        previous = self._action
        self.step_num += 1
        action = self.schedule(self.step_num)
        if previous == ProfilerAction.RECORD and action in (ProfilerAction.NONE, ProfilerAction.WARMUP):
            warnings.warn(f"Incorrect schedule: RECORD followed by {action.name}", UserWarning, stacklevel=2)
            self._stop_recording()  # the unsaved cycle is dropped, as PyTorch's
        elif previous == ProfilerAction.RECORD_AND_SAVE:
            self._finish_cycle()
        self._enter_action(action)

    def _enter_action(self, action: ProfilerAction) -> None:
        recording_wanted = action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if recording_wanted and self._recording is None:
            self._recording = recorder.Recording(self.record_shapes)
            recorder.start(self._recording)
        elif not recording_wanted:
            self._stop_recording()
        self._action = action
        if self._recording is not None:
            if self._step_range is not None:
                recorder.close_range(self._step_range)
            self._step_range = recorder.open_range(f"ProfilerStep#{self.step_num}") \
                if self.schedule is not _always else None

    def _stop_recording(self) -> None:
        if self._recording is not None:
            if self._step_range is not None:
                recorder.close_range(self._step_range)
                self._step_range = None
            recorder.stop(self._recording)
            self._recording = None

    def _finish_cycle(self) -> None:
        recording = self._recording
        self._stop_recording()
        if recording is not None:
            self._events = EventList(sorted(recording.events, key=lambda e: e.start_ns))
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def events(self) -> EventList:
        """The last recorded cycle's events, in order of start."""
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events summed by name (and input shapes): see :meth:`EventList.key_averages`."""
        return self._events.key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the last cycle as a Chrome trace (Perfetto, ``chrome://tracing``)."""
        self._events.export_chrome_trace(path)


def tensorboard_trace_handler(dir_name: str | os.PathLike, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable[[profile], None]:
    """An ``on_trace_ready`` that writes each cycle's Chrome trace into ``dir_name`` as
    ``<worker>.<time in ms>.pt.trace.json`` (PyTorch's names; TensorBoard's profiler plugin and
    Perfetto read them)."""

    def handle(prof: profile) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(os.fspath(dir_name), f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json")
        prof.export_chrome_trace(path)
        if use_gzip:
            import gzip
            import shutil
            with open(path, "rb") as plain, gzip.open(path + ".gz", "wb") as packed:
                shutil.copyfileobj(plain, packed)
            os.remove(path)

    return handle
