"""``dist_autograd.trace``: a timeline of the distributed backward passes a worker roots.

Inside ``with dist_autograd.trace("pass.json"):`` every distributed backward pass this worker
roots (from any thread) is recorded on every worker that takes part (``zgrad/engine/dist/trace.py``:
node runs, tasks, every message of the pass sent and received, the root's waits). On exit the
root collects the recordings from those workers (an RPC to each), aligns their clocks from the
messages' round trips and writes one Chrome trace JSON file (``timeline.py``): open it in
Perfetto (https://ui.perfetto.dev) or ``chrome://tracing``, or summarise it with
``zgrad-launch trace pass.json``. ``[engine] trace = true`` records every pass of a job; each
worker that rooted passes writes ``[engine] trace_file`` when it shuts down.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

from zgrad.distributed.autograd.timeline import WorkerTrace, chrome_trace
from zgrad.distributed.autograd.worker import DistAutogradWorker, current_worker
from zgrad.engine.dist.trace import TraceSession, clock_ns
from zgrad.errors import ZgradError

__all__ = ["trace", "trace_job", "collect_recordings", "write_trace", "SETTLE_S"]

log = logging.getLogger("zgrad.engine")

SETTLE_S = 5.0  # how long a worker waits for a traced pass to be over there before handing in its recording


class trace:
    """Record the distributed backward passes this worker roots inside the block; write their
    timeline to ``path`` on exit (Chrome trace JSON).

    On exit it blocks while it collects the recordings of the other workers that took part (one
    RPC each, after their share of each pass is over there). A worker that cannot be reached is
    left out of the file, with a warning. Blocks nothing while the block runs: the passes pay
    for the recording only (a few microseconds per node and message). A pass is written once:
    with nested blocks (or ``[engine] trace = true``), the first block to exit takes it. Nothing
    is written if no pass was rooted here inside the block.

    Example::

        with dist_autograd.trace("pass.json"):
            with dist_autograd.context() as context_id:
                loss = (rpc.rpc_sync("worker1", torch.add, args=(t1, t2)) * t4).sum()
                dist_autograd.backward(context_id, [loss])

    Raises:
        ZgradError: RPC is not initialized (on entry).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __enter__(self) -> "trace":
        self._worker = current_worker()
        self._session = self._worker.engine.recorder.open_session()
        return self

    def __exit__(self, *exc: object) -> None:
        self._worker.engine.recorder.close_session(self._session)
        write_trace(self._worker, self._session, self.path)


def write_trace(worker: DistAutogradWorker, session: TraceSession, path: Path) -> bool:
    """Collect the recordings of the passes of ``session`` from every worker that took part and
    write their timeline to ``path``; False (nothing written) if no pass was recorded. Blocks."""
    if not session.passes:
        return False
    traces = _collect(worker, session.passes)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(traces)))
    return True


def trace_job(worker: DistAutogradWorker, path: Path) -> None:
    """Record every pass ``worker`` roots until it shuts down, then write their timeline to ``path``
    (``[engine] trace = true``)."""
    session = worker.engine.recorder.open_session()

    def write() -> None:
        worker.engine.recorder.close_session(session)
        if write_trace(worker, session, path):
            log.info("wrote the trace of %d backward pass(es) to %s", len(session.passes), path)

    worker.before_shutdown.append(write)


def _collect(worker: DistAutogradWorker, keys: Sequence[tuple[int, int]]) -> list[WorkerTrace]:
    agent = worker.agent
    own = worker.engine.recorder.collect(keys, SETTLE_S)
    traces = [WorkerTrace(agent.rank, agent.name, own)]
    participants = sorted({rank for recording in own for rank in recording["participants"]} - {agent.rank})
    for rank in participants:
        before = clock_ns()
        try:
            answer = agent.caller.call(rank, collect_recordings, args=([list(key) for key in keys],)).wait()
        except ZgradError as exc:
            log.warning("trace: the recordings of worker %s are missing: %s", agent.worker_info(rank).name, exc)
            continue
        traces.append(WorkerTrace(rank, agent.worker_info(rank).name, answer["recordings"],
                                  (before, answer["now_ns"], clock_ns())))
    return traces


def collect_recordings(keys: list[list[int]]) -> dict[str, Any]:
    """This worker's recordings of the passes ``keys`` (``[context_id, pass_id]``) and its clock
    (the RPC target the root calls; blocks until those passes are over here, at most
    :data:`SETTLE_S`)."""
    recordings = current_worker().engine.recorder.collect([tuple(key) for key in keys], SETTLE_S)
    return {"recordings": recordings, "now_ns": clock_ns()}
