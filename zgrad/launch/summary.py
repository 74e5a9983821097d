"""The failure summary a launcher prints when a job ends for good (torchrun's ChildFailedError table)."""

from __future__ import annotations

import datetime
import signal

from zgrad.launch.workers import WorkerFailure

__all__ = ["format_failures"]

_WIDTH = 60


def _worker_block(index: int, failure: WorkerFailure) -> str:
    when = datetime.datetime.fromtimestamp(failure.time_s or 0).isoformat(sep="_", timespec="seconds")
    code = failure.exitcode
    status = f"{code} (pid: {failure.pid})"
    if code is not None and code < 0:
        status += f" ({signal.Signals(-code).name})"
    return "\n".join([
        f"[{index}]:",
        f"  time      : {when}",
        f"  host      : {failure.host}",
        f"  rank      : {failure.rank} (local_rank: {failure.local_rank})",
        f"  exitcode  : {status}",
        f"  log       : {failure.log}",
        f"  error     : {failure.error}",
    ])


def _node_block(index: int, failure: dict) -> str:
    lines = [f"[{index}]:", f"  node      : {failure.get('node', '?')}"]
    if failure.get("host"):
        lines.append(f"  host      : {failure['host']}")
    lines.append(f"  error     : {failure.get('reason', 'failed')}")
    return "\n".join(lines)


def format_failures(title: str, failures: list[WorkerFailure | dict], reason: str = "") -> str:
    """The table: the first failure as the root cause, the others listed above it."""
    blocks = [_worker_block(i, f) if isinstance(f, WorkerFailure) else _node_block(i, f) for i, f in enumerate(failures)]
    root = blocks[0] if blocks else "  <NO_FAILURE_RECORDED>"
    others = blocks[1:] or ["  <NO_OTHER_FAILURES>"]
    lines = ["=" * _WIDTH, f"{title} FAILED", "-" * _WIDTH, "Failures:", *others, "-" * _WIDTH,
             "Root Cause (first observed failure):", root]
    if reason:
        lines += ["-" * _WIDTH, f"The job stopped: {reason}"]
    lines.append("=" * _WIDTH)
    return "\n".join(lines)
