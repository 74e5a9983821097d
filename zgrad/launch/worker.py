"""What a job's entry calls to join the mesh (RPC) or process group (collectives, DDP) the
launcher set up.

Under ``zgrad-launch`` every worker learns its identity from ``ZGRAD_*`` environment variables
(one process per worker). With ``transport.kind = "inproc"`` all workers are threads of one
process, so the environment cannot tell them apart: :mod:`zgrad.launch.inproc_runner` sets a
thread-local identity instead. :func:`init_rpc` reads whichever applies, so the same entry runs
in both modes.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import zgrad.distributed as dist
from zgrad.distributed import rpc
from zgrad.distributed.identity import WorkerIdentity, set_thread_identity, thread_identity
from zgrad.distributed.rpc.env import resolve_init

__all__ = ["WorkerIdentity", "identity", "init_process_group", "init_rpc", "set_thread_identity"]


def identity() -> WorkerIdentity:
    """Who this worker is: the thread's identity (inproc), else the ``ZGRAD_*`` variables.

    Raises:
        ConfigError: neither is set (not started by ``zgrad-launch``).
    """
    found = thread_identity()
    if found is None:
        plan = resolve_init(None, None, None, None)
        found = WorkerIdentity(plan.name, plan.rank, plan.world_size, plan.config)
    return found


def init_rpc(allowed_modules: Sequence[str] = ()) -> WorkerIdentity:
    """``rpc.init_rpc`` for this worker (see :func:`identity`); returns who it is.

    Args:
        allowed_modules: modules whose functions and classes peers may call, on top of the
            config's ``[rpc] allowed_modules`` (a job's own RPC targets).
    """
    me = identity()
    config = me.config
    if allowed_modules:
        rpc_config = config.rpc
        config = dataclasses.replace(config, rpc=dataclasses.replace(
            rpc_config, allowed_modules=(*rpc_config.allowed_modules, *allowed_modules)))
    rpc.init_rpc(me.name, rank=me.rank, world_size=me.world_size, config=config)
    return me


def init_process_group(backend: str | None = None) -> WorkerIdentity:
    """``dist.init_process_group`` for this worker (see :func:`identity`); returns who it is.

    Under ``zgrad-launch`` the process group finds rank 0 through ``ZGRAD_PG_MASTER_ADDR`` and
    ``ZGRAD_PG_MASTER_PORT`` (inproc needs no address).
    """
    me = identity()
    dist.init_process_group(backend, rank=me.rank, world_size=me.world_size, config=me.config)
    return me
