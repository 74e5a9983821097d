"""A profiler's results as PyTorch's: ``EventList`` (a list of events with ``key_averages``,
``table``, ``total_average`` and ``export_chrome_trace``) and ``FunctionEventAvg`` (the events of
one name, and with ``group_by_input_shape`` one input shape, summed). Times are microseconds, as
PyTorch's ``cpu_time_total`` and the like."""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from zgrad.profiler.recorder import Event

__all__ = ["EventList", "FunctionEventAvg", "format_time"]

_SORT_KEYS = ("cpu_time", "cpu_time_total", "self_cpu_time_total", "count", "cuda_time", "cuda_time_total",
              "self_cuda_time_total", "device_time", "device_time_total", "self_device_time_total",
              "cpu_memory_usage", "self_cpu_memory_usage")


def format_time(us: float) -> str:
    """PyTorch's: microseconds as 'us', 'ms' or 's' with three decimals."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class FunctionEventAvg:
    """The events of one key summed: ``count``, ``cpu_time_total``, ``self_cpu_time_total`` (µs),
    their averages ``cpu_time`` and ``self_cpu_time``, and ``input_shapes`` (when grouped by them).
    Device times are 0: zgrad times the host only."""

    def __init__(self, key: str, input_shapes: Any = None) -> None:
        self.key, self.input_shapes = key, input_shapes
        self.count, self.cpu_time_total, self.self_cpu_time_total = 0, 0.0, 0.0
        self.device_time_total = self.self_device_time_total = self.cuda_time_total = self.self_cuda_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.is_top_level = False

    def add(self, event: Event) -> None:
        self.count += 1
        self.cpu_time_total += event.duration_ns / 1e3
        self.self_cpu_time_total += event.self_ns / 1e3
        self.is_top_level = self.is_top_level or event.depth == 0

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    cuda_time = device_time = property(lambda self: 0.0)

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={format_time(self.self_cpu_time_total)} "
                f"cpu_time={format_time(self.cpu_time_total)} input_shapes={self.input_shapes}>")


class EventList(list):
    """A profiler's events (or their averages), with PyTorch's ways of reading them."""

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> "EventList":
        """One :class:`FunctionEventAvg` per name (and input shapes), in order of first appearance."""
        groups: dict[Any, FunctionEventAvg] = {}
        for event in self:
            shapes = str(event.input_shapes) if group_by_input_shape else None
            key = (event.name, shapes)
            if key not in groups:
                groups[key] = FunctionEventAvg(event.name, event.input_shapes if group_by_input_shape else None)
            groups[key].add(event)
        return EventList(groups.values())

    def total_average(self) -> FunctionEventAvg:
        """All events summed into one ``Total``."""
        total = FunctionEventAvg("Total")
        for event in self:
            total.add(event)
        return total

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of every event's self CPU time (µs)."""
        return sum(e.self_cpu_time_total if isinstance(e, FunctionEventAvg) else e.self_ns / 1e3 for e in self)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False, time_unit: str | None = None) -> str:
        """PyTorch's table: name, self CPU %, self CPU, CPU total %, CPU total, CPU time avg and
        number of calls (and input shapes when grouped by them), sorted by ``sort_by`` descending.

        Raises:
            AttributeError: an unknown ``sort_by`` key.
        """
        rows = list(self) if isinstance(self[0] if self else None, FunctionEventAvg) else list(self.key_averages())
        if top_level_events_only:
            rows = [r for r in rows if r.is_top_level]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"'FunctionEventAvg' object has no attribute '{sort_by}'")
            rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
        rows = rows[:row_limit] if row_limit is not None and row_limit > 0 else rows
        total = self.self_cpu_time_total or 1.0
        shapes = any(r.input_shapes is not None for r in rows)
        name_width = min(max([len(r.key) for r in rows] + [4]) + 4, max_name_column_width)
        headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        widths = [name_width] + [12] * 6
        if shapes:
            shape_width = min(max([len(str(r.input_shapes)) for r in rows] + [12]) + 4, max_shapes_column_width)
            headers.append("Input Shapes")
            widths.append(shape_width)
        line = "".join("-" * w + "  " for w in widths)

        def row(cells: Iterable[str]) -> str:
            return "".join(f"{c:>{w}}  " for c, w in zip(cells, widths))

        def clip(text: str, width: int) -> str:
            return text if len(text) <= width else text[:width - 3] + "..."

        lines = [header] if header else []
        lines += [line, row(headers), line]
        for r in rows:
            cells = [clip(r.key, name_width), f"{100 * r.self_cpu_time_total / total:.2f}%",
                     format_time(r.self_cpu_time_total), f"{100 * r.cpu_time_total / total:.2f}%",
                     format_time(r.cpu_time_total), format_time(r.cpu_time), str(r.count)]
            if shapes:
                cells.append(clip(str(r.input_shapes) if r.input_shapes is not None else "", shape_width))
            lines.append(row(cells))
        lines += [line, f"Self CPU time total: {format_time(self.self_cpu_time_total)}"]
        return "\n".join(lines) + "\n"

    def export_chrome_trace(self, path: str | os.PathLike) -> None:
        """Write the events as a Chrome trace (open it in Perfetto or ``chrome://tracing``): one
        complete event per op, backward node and range, on its thread's row."""
        pid = os.getpid()
        trace = [{"ph": "X", "cat": e.kind, "name": e.name, "pid": pid, "tid": e.thread, "ts": e.start_ns / 1e3,
                  "dur": e.duration_ns / 1e3, "args": {} if e.input_shapes is None else {"Input Dims": e.input_shapes}}
                 for e in self if isinstance(e, Event)]
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)
