"""``zgrad-launch trace FILE``: what each worker did in a distributed autograd trace, as a table.

``FILE`` is a Chrome trace written by ``zgrad.distributed.autograd.trace`` (or ``[engine] trace
= true``). Per worker: the passes it took part in, the tasks and nodes it ran, *compute* (time
running the passes' work: tasks, and at the root the handling of reports; overlaps counted once
per thread), *waiting* (at the root: blocked in ``backward`` with nothing to run; elsewhere: the
time a pass was under way there, from its first to its last event, without running its work) and
the messages it sent and received, by kind.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["WorkerSummary", "summarize", "format_summary", "load_trace"]

WORK_CATEGORIES = ("task", "report")


class WorkerSummary(NamedTuple):
    """One worker's row."""

    rank: int
    worker: str
    passes: int
    tasks: int
    nodes: int
    compute_ms: float
    waiting_ms: float
    sent: Counter
    received: Counter


def load_trace(path: str | Path) -> dict[str, Any]:
    """The trace in ``path``.

    Raises:
        ValueError: the file is not a Chrome trace (no ``traceEvents`` list).
        OSError: it cannot be read.
    """
    trace = json.loads(Path(path).read_text())
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ValueError(f"{path} is not a Chrome trace: it has no traceEvents list")
    return trace


def _covered_us(spans: list[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` spans."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def summarize(trace: dict[str, Any]) -> list[WorkerSummary]:
    """One row per worker (process) of the trace, by rank."""
    names: dict[int, str] = {}
    work: dict[int, dict[tuple[int, str], list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    windows: dict[int, dict[str, list[float]]] = defaultdict(dict)
    counts: dict[int, Counter] = defaultdict(Counter)
    sent: dict[int, Counter] = defaultdict(Counter)
    received: dict[int, Counter] = defaultdict(Counter)
    waits: dict[int, float] = defaultdict(float)
    for event in trace["traceEvents"]:
        pid = event.get("pid")
        if event.get("ph") == "M":
            if event.get("name") == "process_name":
                names[pid] = event["args"]["name"]
            continue
        if event.get("ph") != "X":
            continue
        start, end = event["ts"], event["ts"] + event.get("dur", 0.0)
        category, pass_id = event.get("cat"), event.get("args", {}).get("pass", "")
        window = windows[pid].setdefault(pass_id, [start, end])
        window[0], window[1] = min(window[0], start), max(window[1], end)
        counts[pid][category] += 1
        if category in WORK_CATEGORIES:
            work[pid][(event["tid"], pass_id)].append((start, end))
        elif category == "wait":
            waits[pid] += end - start
        elif category == "message":
            direction, kind = event["name"].split()[:2]
            (sent if direction == "send" else received)[pid][kind] += 1
    rows = []
    for pid in sorted(set(names) | set(windows)):
        compute_by_pass: dict[str, float] = defaultdict(float)
        for (_, pass_id), spans in work[pid].items():
            compute_by_pass[pass_id] += _covered_us(spans)
        compute = sum(compute_by_pass.values())
        if pid in waits:
            waiting = waits[pid]
        else:
            waiting = sum(max(0.0, (end - start) - compute_by_pass[pass_id]) for pass_id, (start, end) in windows[pid].items())
        rows.append(WorkerSummary(pid, names.get(pid, f"rank {pid}"), len(windows[pid]), counts[pid]["task"],
                                  counts[pid]["node"], compute / 1000.0, waiting / 1000.0, sent[pid], received[pid]))
    return rows


def format_summary(rows: list[WorkerSummary]) -> str:
    """The rows as a text table, then the messages by kind."""
    header = ("worker", "passes", "tasks", "nodes", "compute ms", "waiting ms", "sent", "received")
    table = [header] + [(f"{r.worker}", str(r.passes), str(r.tasks), str(r.nodes), f"{r.compute_ms:.3f}",
                         f"{r.waiting_ms:.3f}", str(sum(r.sent.values())), str(sum(r.received.values())))
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in table]
    lines.append("")
    lines.append("messages by kind (sent / received):")
    for r in rows:
        kinds = sorted(set(r.sent) | set(r.received))
        lines.append(f"  {r.worker}: " + (", ".join(f"{k} {r.sent[k]}/{r.received[k]}" for k in kinds) or "none"))
    return "\n".join(lines)
