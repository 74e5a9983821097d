"""Recording what one worker does for the distributed backward passes that are traced.

A pass is traced when its root records it (``zgrad.distributed.autograd.trace``, or ``[engine]
trace = true``): the root's :class:`TraceRecorder` has an open session when the pass starts, and
the pass's GRAD and DISCOVER messages say ``trace`` so that every worker that takes part records
its share. A worker records, on its own clock (``time.perf_counter_ns``, the system-wide monotonic
clock on Linux), in one :class:`PassRecording` per pass: every node run, every task (a run of the
local graph, a discovery step, the root's handling of a report), every message of the pass sent
and received, and the root's waits. The root collects the recordings once the pass is over
everywhere (``zgrad/distributed/autograd/tracing.py`` aligns the clocks and writes the timeline).

Cost when nothing is traced: the engine checks ``recorder.recordings`` (an empty dict) once per
message, and each graph task its ``observer`` (None) once per node.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Iterable, Mapping

from zgrad.engine.dist.protocol import TRACE_KEY, message_id, pass_key
from zgrad.engine.graph import Node

__all__ = ["TraceRecorder", "PassRecording", "TraceSession", "MAX_KEPT_RECORDINGS", "clock_ns"]

MAX_KEPT_RECORDINGS = 4096  # recordings nobody collected yet; the oldest beyond this are dropped

clock_ns = time.perf_counter_ns


class PassRecording:
    """One worker's record of one traced pass. Appending is thread-safe (``list.append``).

    ``events`` are ``[category, thread id, start ns, end ns, name, args]``; categories: ``node``,
    ``task``, ``report``, ``wait``, ``backward`` (spans), ``send``, ``recv`` (instants: end 0).
    """

    def __init__(self, context_id: int, pass_id: int) -> None:
        self.context_id = context_id
        self.pass_id = pass_id
        self.events: list[list[Any]] = []
        self.threads: dict[int, str] = {}
        self.participants: set[int] = set()  # at the root: every worker that took part
        self.ended = threading.Event()  # the pass is over on this worker: nothing more is recorded
        self._holds = 1  # released by whoever ends the pass here (see :meth:`hold`)
        self._lock = threading.Lock()

    def hold(self) -> None:
        """Something more will be recorded: :attr:`ended` waits for the matching :meth:`release`."""
        with self._lock:
            self._holds += 1

    def release(self) -> None:
        """Release a hold (the first is the pass's own, released when it ends here)."""
        with self._lock:
            self._holds -= 1
            if self._holds == 0:
                self.ended.set()

    def _thread(self) -> int:
        ident = threading.get_ident()
        if ident not in self.threads:
            self.threads[ident] = threading.current_thread().name
        return ident

    def span(self, category: str, name: str, start_ns: int, end_ns: int, args: dict[str, Any] | None = None) -> None:
        """Something this thread did from ``start_ns`` to ``end_ns``."""
        self.events.append([category, self._thread(), start_ns, end_ns, name, args or {}])

    def node_ran(self, node: Node, start_ns: int, end_ns: int) -> None:
        """The graph task's observer: ``node`` ran in this thread."""
        self.events.append(["node", self._thread(), start_ns, end_ns, node.name, {}])

    def message(self, category: str, kind: str, peer: int, body: Mapping[str, Any]) -> None:
        """A message of the pass is sent to (``send``) or arrived from (``recv``) ``peer``, now."""
        self.events.append([category, self._thread(), clock_ns(), 0, kind,
                            {"peer": peer, "id": message_id(kind, body)}])

    def export(self) -> dict[str, Any]:
        """The recording as plain values (for the RPC codec)."""
        return {"context_id": self.context_id, "pass_id": self.pass_id, "events": list(self.events),
                "threads": [[ident, name] for ident, name in list(self.threads.items())],
                "participants": sorted(self.participants)}


class TraceSession:
    """The passes a worker roots while a ``trace`` block (or a job-wide trace) is open."""

    def __init__(self) -> None:
        self.passes: list[tuple[int, int]] = []


class TraceRecorder:
    """The recordings of one worker, kept until the root of their pass collects them. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.recordings: OrderedDict[tuple[int, int], PassRecording] = OrderedDict()
        self.sessions: list[TraceSession] = []

    # --- the root's sessions --------------------------------------------------------------------

    def open_session(self) -> TraceSession:
        """Trace every pass this worker roots from now until :meth:`close_session`."""
        session = TraceSession()
        with self._lock:
            self.sessions = [*self.sessions, session]
        return session

    def close_session(self, session: TraceSession) -> None:
        with self._lock:
            self.sessions = [s for s in self.sessions if s is not session]

    def note_rooted(self, context_id: int, pass_id: int) -> None:
        """A traced pass starts here: every open session will collect it."""
        for session in self.sessions:
            session.passes.append((context_id, pass_id))

    # --- recording ------------------------------------------------------------------------------

    def record(self, context_id: int, pass_id: int) -> PassRecording:
        """The recording of a pass (made on first use)."""
        key = (context_id, pass_id)
        with self._lock:
            recording = self.recordings.get(key)
            if recording is None:
                recording = self.recordings[key] = PassRecording(context_id, pass_id)
                while len(self.recordings) > MAX_KEPT_RECORDINGS:
                    self.recordings.popitem(last=False)
            return recording

    def _find(self, body: Mapping[str, Any]) -> PassRecording | None:
        key = pass_key(body)
        return None if key is None else self.recordings.get(key)

    def sending(self, dst: int, kind: str, body: Mapping[str, Any]) -> None:
        """A message leaves for ``dst``: recorded if its pass is."""
        recording = self._find(body)
        if recording is not None:
            recording.message("send", kind, dst, body)

    def receiving(self, src: int, kind: str, body: Mapping[str, Any]) -> None:
        """A message arrived from ``src``: recorded if its pass is (a GRAD or DISCOVER that says
        ``trace`` starts the recording of its pass here)."""
        key = pass_key(body)
        recording = None if key is None else self.recordings.get(key)
        if recording is None and key is not None and body.get(TRACE_KEY):
            recording = self.record(*key)
        if recording is not None:
            recording.message("recv", kind, src, body)

    # --- collecting -----------------------------------------------------------------------------

    def collect(self, keys: Iterable[tuple[int, int]], settle_s: float) -> list[dict[str, Any]]:
        """Take the recordings of the passes ``keys`` (those this worker has), each once its pass is
        over here (waiting at most ``settle_s`` in all), as plain values."""
        deadline = time.monotonic() + settle_s
        taken = []
        for key in keys:
            with self._lock:
                recording = self.recordings.get(tuple(key))
            if recording is None:
                continue
            recording.ended.wait(max(0.0, deadline - time.monotonic()))
            with self._lock:
                self.recordings.pop((recording.context_id, recording.pass_id), None)
            taken.append(recording.export())
        return taken
