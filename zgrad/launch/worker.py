"""What a job's entry calls to join the mesh the launcher set up.

Under ``zgrad-launch`` every worker learns its identity from ``ZGRAD_*`` environment variables
(one process per worker). With ``transport.kind = "inproc"`` all workers are threads of one
process, so the environment cannot tell them apart: :mod:`zgrad.launch.inproc_runner` sets a
thread-local identity instead. :func:`init_rpc` reads whichever applies, so the same entry runs
in both modes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from zgrad.distributed import rpc
from zgrad.distributed.rpc.env import resolve_init

__all__ = ["WorkerIdentity", "identity", "init_rpc", "set_thread_identity"]


@dataclass(frozen=True)
class WorkerIdentity:
    name: str
    rank: int
    world_size: int
    config: object = None


_local = threading.local()


def set_thread_identity(identity: WorkerIdentity | None) -> None:
    """Give the calling thread a worker identity (used by the inproc runner)."""
    _local.identity = identity


def identity() -> WorkerIdentity:
    """Who this worker is: the thread's identity (inproc), else the ``ZGRAD_*`` variables.

    Raises:
        ConfigError: neither is set (not started by ``zgrad-launch``).
    """
    found = getattr(_local, "identity", None)
    if found is None:
        plan = resolve_init(None, None, None, None)
        found = WorkerIdentity(plan.name, plan.rank, plan.world_size, plan.config)
    return found


def init_rpc() -> WorkerIdentity:
    """``rpc.init_rpc`` for this worker (see :func:`identity`); returns who it is."""
    me = identity()
    rpc.init_rpc(me.name, rank=me.rank, world_size=me.world_size, config=me.config)
    return me
