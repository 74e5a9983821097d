"""``zgrad.autograd.profiler``, as ``torch.autograd.profiler``: the older profiler interface,
over the recorder of :mod:`zgrad.profiler`.

    with zgrad.autograd.profiler.profile(record_shapes=True) as prof:
        model(inputs)
    print(prof.key_averages().table(sort_by="self_cpu_time_total"))
"""

from __future__ import annotations

import os
from typing import Any

from zgrad.profiler import record_function
from zgrad.profiler import recorder
from zgrad.profiler.events import EventList

__all__ = ["profile", "record_function"]


class profile:  # noqa: N801 - PyTorch's name
    """Record every op, backward node and ``record_function`` range of a block (``enabled=False``:
    nothing). ``use_cuda``/``use_device`` and the memory, stack, flops and module options are
    accepted; zgrad times the host only.

    Raises:
        RuntimeError: another profiler is running, or the results are read inside the block
            (PyTorch's message).
    """

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device: str | None = None,
                 record_shapes: bool = False, with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False, use_kineto: bool = False,
                 use_cpu: bool = True, experimental_config: Any = None, acc_events: bool = False,
                 custom_trace_id_callback: Any = None) -> None:
        self.enabled, self.record_shapes = enabled, record_shapes
        self.use_cuda, self.use_device, self.profile_memory = use_cuda, use_device, profile_memory
        self._recording: recorder.Recording | None = None
        self._events: EventList | None = None

    def __enter__(self) -> "profile":
        if self.enabled:
            self._recording = recorder.Recording(self.record_shapes)
            recorder.start(self._recording)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._recording is not None:
            recorder.stop(self._recording)
            self._events = EventList(sorted(self._recording.events, key=lambda e: e.start_ns))
            self._recording = None

    def _results(self) -> EventList:
        if self._events is None:
            raise RuntimeError("Profiler didn't finish running")
        return self._events

    @property
    def function_events(self) -> EventList | None:
        """Every recorded event, in order of start (None before the block ends, or when disabled)."""
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """The events summed by name (and input shapes)."""
        return self._results().key_averages(group_by_input_shape, group_by_stack_n)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """PyTorch's table of the events summed by name (see ``EventList.table``)."""
        return self.key_averages().table(sort_by, row_limit, max_src_column_width, max_name_column_width,
                                         max_shapes_column_width, header, top_level_events_only)

    def total_average(self) -> Any:
        """Every event summed into one."""
        return self._results().total_average()

    @property
    def self_cpu_time_total(self) -> float:
        """The recorded self CPU time in µs."""
        return self._results().self_cpu_time_total

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the events as a Chrome trace."""
        self._results().export_chrome_trace(path)

    def __str__(self) -> str:
        return self.table()
