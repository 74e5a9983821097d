"""One timeline from the recordings of every worker: clocks aligned, written as a Chrome trace.

Each worker records its share of a traced pass on its own clock (``dist/trace.py``). The workers'
clocks are aligned to the root's from the messages themselves: a message that leaves worker ``a``
at ``sent`` (``a``'s clock) and arrives at ``b`` at ``received`` (``b``'s clock) cannot arrive
before it left, so ``offset_b - offset_a <= received - sent`` (an offset is a worker's clock
minus the root's). Every message of the pass gives one such bound, and so does the round trip of
the call that collects a worker's recording. The bounds are difference constraints: the shortest
paths from and to the root give each offset's range, and the middle of every range satisfies
all the bounds at once (the ranges are those of a system of difference constraints), so no
message arrives before it left on the aligned timeline. On one host the offsets come out near 0,
as they should (Linux's monotonic clock is system-wide).

The Chrome trace (``traceEvents``, opened by Perfetto or ``chrome://tracing``) has one process
per worker (``pid`` = rank), one thread row per thread, a slice per node run, task, report
handled at the root and wait, a 1 ns slice per message sent or received, and a flow arrow from
each message's send to its arrival.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["WorkerTrace", "align_clocks", "chrome_trace"]

MESSAGE_SLICE_US = 0.001  # a message sent or received is drawn as a 1 ns slice (flows bind to slices)


class WorkerTrace(NamedTuple):
    """What one worker recorded of the traced passes (``PassRecording.export`` each).

    ``round_trip``: ``(root clock before the collecting call, this worker's clock while answering
    it, root clock after)``; None for the root itself.
    """

    rank: int
    name: str
    recordings: list[dict[str, Any]]
    round_trip: tuple[int, int, int] | None = None


def _messages(traces: list[WorkerTrace], category: str) -> dict[tuple, tuple[int, int]]:
    """``(context, pass, kind, src, dst, id) -> (rank, time)`` of every message sent or received."""
    found = {}
    for trace in traces:
        for recording in trace.recordings:
            for event in recording["events"]:
                if event[0] != category:
                    continue
                kind, args = event[4], event[5]
                src, dst = (trace.rank, args["peer"]) if category == "send" else (args["peer"], trace.rank)
                found[(recording["context_id"], recording["pass_id"], kind, src, dst, args["id"])] = (trace.rank, event[2])
    return found


def _shortest(edges: list[tuple[int, int, int]], source: int, nodes: set[int]) -> dict[int, int] | None:
    """Bellman-Ford: shortest path lengths from ``source``; None on a negative cycle."""
    dist = {source: 0}
    for _ in range(len(nodes)):
        changed = False
        for u, v, weight in edges:
            if u in dist and dist[u] + weight < dist.get(v, dist[u] + weight + 1):
                dist[v] = dist[u] + weight
                changed = True
        if not changed:
            return dist
    return None


def align_clocks(traces: list[WorkerTrace]) -> dict[int, int]:
    """Offset (ns) of every worker's clock from the root's: worker time - offset = root time."""
    root = next(t.rank for t in traces if t.round_trip is None)
    edges = []  # (a, b, c): offset_b - offset_a <= c
    sent = _messages(traces, "send")
    for key, (dst, received_at) in _messages(traces, "recv").items():
        if key in sent:
            src, sent_at = sent[key]
            edges.append((src, dst, received_at - sent_at))
    for trace in traces:
        if trace.round_trip is not None:
            before, answered, after = trace.round_trip
            edges += [(root, trace.rank, answered - before), (trace.rank, root, after - answered)]
    ranks = {t.rank for t in traces}
    upper = _shortest(edges, root, ranks)
    lower = _shortest([(v, u, c) for u, v, c in edges], root, ranks)
    offsets = {root: 0}
    for trace in traces:
        if trace.round_trip is None:
            continue
        before, answered, after = trace.round_trip
        if upper is None or lower is None:  # contradictory bounds (a clock jumped): the round trip alone
            offsets[trace.rank] = answered - (before + after) // 2
        else:
            offsets[trace.rank] = (upper[trace.rank] - lower[trace.rank]) // 2
    return offsets


def chrome_trace(traces: list[WorkerTrace]) -> dict[str, Any]:
    """The Chrome trace JSON object (``{"traceEvents": [...], ...}``) of the recordings."""
    offsets = align_clocks(traces)
    starts = [event[2] - offsets[t.rank] for t in traces for r in t.recordings for event in r["events"]]
    origin = min(starts, default=0)

    def us(rank: int, ns: int) -> float:
        return (ns - offsets[rank] - origin) / 1000.0

    events: list[dict[str, Any]] = []
    slices: list[dict[str, Any]] = []
    message_slices: dict[tuple, dict[str, Any]] = {}
    for trace in sorted(traces, key=lambda t: t.rank):
        pid = trace.rank
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{trace.name} (rank {pid})"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
        tids: dict[int, int] = {}
        for recording in trace.recordings:
            names = dict((ident, name) for ident, name in recording["threads"])
            for category, ident, start, end, name, args in recording["events"]:
                if ident not in tids:
                    tids[ident] = len(tids) + 1
                    events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[ident],
                                   "args": {"name": names.get(ident, str(ident))}})
                event = {"ph": "X", "pid": pid, "tid": tids[ident], "ts": us(pid, start),
                         "args": {**args, "pass": f"{recording['pass_id']:#x}"}}
                if category in ("send", "recv"):
                    arrow = "→" if category == "send" else "←"
                    event.update(name=f"{category} {name} {arrow} rank {args['peer']}", cat="message",
                                 dur=MESSAGE_SLICE_US)
                    src, dst = (pid, args["peer"]) if category == "send" else (args["peer"], pid)
                    message_slices[(category, recording["context_id"], recording["pass_id"], name, src, dst,
                                    args["id"])] = event
                else:
                    event.update(name=name, cat=category, dur=max(end - start, 0) / 1000.0)
                slices.append(event)
    slices.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    events += slices
    flow_id = 0
    for (category, *key), send in sorted(message_slices.items(), key=lambda item: item[1]["ts"]):
        received = message_slices.get(("recv", *key))
        if category != "send" or received is None:
            continue
        flow_id += 1
        kind = key[2]
        events.append({"ph": "s", "id": flow_id, "name": kind, "cat": "message", "pid": send["pid"],
                       "tid": send["tid"], "ts": send["ts"]})
        events.append({"ph": "f", "bp": "e", "id": flow_id, "name": kind, "cat": "message",
                       "pid": received["pid"], "tid": received["tid"], "ts": received["ts"]})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"clock_offsets_ns": {str(rank): offset for rank, offset in offsets.items()},
                          "passes": sorted({f"{r['context_id']}:{r['pass_id']:#x}" for t in traces
                                            for r in t.recordings})}}
