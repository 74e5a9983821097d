"""Who the calling thread is in a job whose workers are threads of one process (``inproc``).

One process per worker learns its identity from ``ZGRAD_*`` variables. With
``transport.kind = "inproc"`` every worker is a thread of one process, which one environment
cannot tell apart: :mod:`zgrad.launch.inproc_runner` gives each thread its identity here, and
``rpc.init_rpc()`` and ``init_process_group()`` called without arguments read it first.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from zgrad.config import Config

__all__ = ["WorkerIdentity", "set_thread_identity", "thread_identity"]


@dataclass(frozen=True)
class WorkerIdentity:
    """Who a worker of a launched job is, and the job's config."""

    name: str
    rank: int
    world_size: int
    config: Config


_local = threading.local()


def set_thread_identity(identity: WorkerIdentity | None) -> None:
    """Give the calling thread a worker identity (the inproc runner does), or take it away."""
    _local.identity = identity


def thread_identity() -> WorkerIdentity | None:
    """The calling thread's worker identity, or None outside an inproc job's worker threads."""
    return getattr(_local, "identity", None)
