"""RPC beside a process group that rendezvoused at the same address.

PyTorch's ``init_process_group`` and ``init_rpc`` both rendezvous at ``MASTER_ADDR:MASTER_PORT``
(``env://``) and share that port through a multi-tenant store; programs such as the batching
parameter server call both with the same environment. zgrad's rank 0 listens at that port with
its process group's mesh, so RPC cannot listen there too: instead, when the default process
group rendezvoused at the very address RPC is about to use, with the same ranks and world size,
rank 0 picks a free port for RPC and the process group broadcasts it to every rank. Every rank
of such a program calls ``init_rpc``, so the broadcast is met everywhere.
"""

from __future__ import annotations

import socket

import numpy as np

from zgrad.distributed.collectives.api import broadcast
from zgrad.distributed.collectives.state import current_world
from zgrad.tensor import Tensor

__all__ = ["rendezvous_port_beside_process_group"]


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host if host not in ("localhost", "") else "127.0.0.1", 0))
        return probe.getsockname()[1]


def rendezvous_port_beside_process_group(master_addr: str | None, master_port: int | None, rank: int,
                                         world_size: int) -> int | None:
    """The port RPC rendezvouses at instead of ``master_port``, agreed through the default process
    group when that group already rendezvoused at ``master_addr:master_port`` with this rank and
    world size; None when there is no such group (RPC then uses ``master_port`` as it is).
    Blocks on the broadcast (every rank of the group must call ``init_rpc``)."""
    if master_port is None:
        return None
    world = current_world(required=False)
    if world is None or world.destroyed:
        return None
    plan = world.plan
    if (plan.master_addr, plan.master_port, plan.rank, plan.world_size) != (master_addr, master_port, rank, world_size):
        return None
    port = Tensor(np.array([_free_port(master_addr or "127.0.0.1") if rank == 0 else 0], dtype=np.int64))
    broadcast(port, src=0)
    return int(port.numpy()[0])
