"""``zgrad.distributed``: collectives over a process group (mirroring ``torch.distributed``),
beside the subpackages ``rpc``, ``autograd``, ``optim`` and ``nn``.

Example::

    import zgrad
    import zgrad.distributed as dist

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500", rank=rank, world_size=2)
    t = zgrad.ones(4) * (rank + 1)
    dist.all_reduce(t)                       # in place: 3.0 everywhere
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    work.wait()
    dist.destroy_process_group()
"""

from zgrad.distributed.collectives.api import (
    GroupMember, all_gather, all_gather_into_tensor, all_reduce, barrier, broadcast, destroy_process_group,
    get_backend, get_process_group_ranks, get_rank, get_world_size, group, init_process_group, is_initialized,
    monitored_barrier, new_group, reduce, reduce_scatter, reduce_scatter_tensor,
)
from zgrad.distributed.collectives.backends import (
    get_default_backend_for_device, is_available, is_gloo_available, is_mpi_available, is_nccl_available,
    is_torchelastic_launched,
)
from zgrad.distributed.collectives.fingerprint import ReduceOp
from zgrad.distributed.collectives.process_group import ProcessGroup
from zgrad.distributed.collectives.work import Work
from zgrad.errors import CollectiveError as DistBackendError

__all__ = [
    "DistBackendError", "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather", "all_gather_into_tensor",
    "all_reduce", "barrier", "broadcast", "destroy_process_group", "get_backend", "get_default_backend_for_device",
    "get_process_group_ranks", "get_rank", "get_world_size", "group", "init_process_group", "is_available",
    "is_gloo_available",
    "is_initialized", "is_mpi_available", "is_nccl_available", "is_torchelastic_launched", "monitored_barrier",
    "new_group", "reduce", "reduce_scatter", "reduce_scatter_tensor",
]
