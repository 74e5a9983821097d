"""The public collectives (mirroring ``torch.distributed``); each works through the calling
thread's process group world (``state.py``).

Every collective modifies the tensors it is given in place, as PyTorch's do, and takes
``group=`` (default: the world) and ``async_op=`` (True: return a :class:`Work` at once; False:
block until this rank's part is done and return None). Ranks outside ``group`` return at once.
Supported dtypes: float32, float64, int32, int64 (and float16 and bfloat16, for compressed gradients;
they are summed in float32 and rounded once per step).
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from zgrad.distributed.collectives import ops
from zgrad.distributed.collectives.env import check_backend, resolve_pg_init
from zgrad.distributed.collectives.fingerprint import ReduceOp, as_reduce_op, check_dtype
from zgrad.distributed.collectives.process_group import NON_GROUP_MEMBER, ProcessGroup, World
from zgrad.distributed.collectives.state import bound_world, current_world, register_world, unregister_world
from zgrad.distributed.collectives.work import Work, timeout_seconds
from zgrad.errors import ZgradError
from zgrad.kernels.host_memory import leave_host_allocator, tune_host_allocator
from zgrad.tensor import Tensor

__all__ = [
    "init_process_group", "destroy_process_group", "is_initialized", "get_rank", "get_world_size", "get_backend",
    "new_group", "get_process_group_ranks", "group", "GroupMember", "broadcast", "all_reduce", "reduce", "all_gather",
    "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "barrier", "monitored_barrier",
]

log = logging.getLogger("zgrad.collectives")


class _WorldMeta(type):
    @property
    def WORLD(cls) -> ProcessGroup | None:  # noqa: N802 - PyTorch's name
        world = current_world(required=False)
        return world.default if world is not None else None


class group(metaclass=_WorldMeta):  # noqa: N801 - PyTorch's name
    """``group.WORLD``: the calling thread's default process group (None before init)."""


class GroupMember(metaclass=_WorldMeta):
    """``GroupMember.WORLD`` and ``GroupMember.NON_GROUP_MEMBER`` (what ``new_group`` returns
    to ranks outside the group)."""

    NON_GROUP_MEMBER = NON_GROUP_MEMBER


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout: Any = None,
                       world_size: int = -1, rank: int = -1, config: Any = None) -> None:
    """Join the default process group of ``world_size`` ranks. Blocks until every rank has
    (at most ``[transport] connect_timeout_s``).

    The group runs over a ZeroMQ mesh of its own, of the transport the config names (tcp, ipc,
    inproc or a plugin), beside the RPC agent's if ``init_rpc`` runs too.

    Args:
        backend: ``"zmq"`` (the default); ``"gloo"``, ``"nccl"`` are accepted as names for it.
        init_method: ``"env://"`` (``MASTER_ADDR``, ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``) or
            ``"tcp://host:port"`` (rank 0 listens there). Under ``zgrad-launch``: nothing.
        timeout: seconds or a ``timedelta`` one collective may take (default ``[ddp] timeout_s``).
        world_size, rank: -1 takes them from ``init_method``, the environment or the config.
        config: a TOML path, a dict of sections or a parsed config, as ``init_rpc`` takes.

    Raises:
        ConfigError: a missing or inconsistent setting. ValueError: an unknown backend or init_method.
        ZgradError: this thread already initialized one ("trying to initialize the default
            process group twice!").
        ZgradTimeoutError, TransportError: the mesh could not form in time.
    """
    check_backend(backend)
    existing = bound_world()
    if existing is not None and not existing.destroyed:
        raise ZgradError("trying to initialize the default process group twice!")
    plan = resolve_pg_init(init_method, timeout, world_size, rank, config)
    if plan.config.memory.tune_malloc:
        tune_host_allocator(plan.config.memory.keep_free_mb)
    else:
        leave_host_allocator()
    world = World(plan, str(backend).lower() if backend else "zmq")
    register_world(world)
    try:
        world.start()
    except BaseException:
        unregister_world(world)
        world.destroy()
        raise


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Destroy ``group``, or with None the whole process group (every group, the mesh). Then
    ``init_process_group`` may run again. Blocks until the group threads stopped (bounded).

    Raises:
        ZgradError: not initialized.
    """
    world = current_world()
    if group is NON_GROUP_MEMBER:
        return
    if group is None or group is world.default:
        unregister_world(world)
        world.destroy()
        return
    world.destroy_group(group)


def is_initialized() -> bool:
    """Whether this thread has a default process group."""
    world = current_world(required=False)
    return world is not None and not world.destroyed


def _resolve(group: Any) -> ProcessGroup | None:
    """The group to run on; None for ranks outside it (the collective returns at once)."""
    if group is NON_GROUP_MEMBER:
        return None
    if group is None:
        return current_world().default
    if not isinstance(group, ProcessGroup):
        raise TypeError(f"group must be a ProcessGroup from new_group (or None), got {type(group).__name__}")
    return group


def get_rank(group: Any = None) -> int:
    """This process's rank in ``group`` (default: the world); -1 outside it."""
    pg = _resolve(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group: Any = None) -> int:
    """Number of ranks in ``group`` (default: the world); -1 outside it."""
    pg = _resolve(group)
    return -1 if pg is None else pg.size()


def get_backend(group: Any = None) -> str:
    """The backend name ``init_process_group`` was given (``"zmq"`` by default; a script that
    asked for ``"gloo"`` sees ``"gloo"``): every group runs over zgrad's mesh whatever its name.

    Raises:
        ZgradError: not initialized.
    """
    pg = _resolve(group)
    return (pg.world if pg is not None else current_world()).backend


def new_group(ranks: Sequence[int] | None = None, timeout: Any = None, backend: str | None = None) -> Any:
    """A group of ``ranks`` (all ranks by default). Every rank of the world must call it, in the
    same order, members or not, as in PyTorch; ranks outside get ``GroupMember.NON_GROUP_MEMBER``.
    Does not block. ``timeout`` is accepted for compatibility (collectives use the world's).

    Raises:
        ValueError: a rank out of range or repeated.
    """
    check_backend(backend)
    timeout_seconds(timeout)
    return current_world().new_group(ranks)


def get_process_group_ranks(group: ProcessGroup) -> list[int]:
    """The global ranks of ``group``'s members."""
    return list(group.ranks)


def _array(tensor: Any, what: str) -> Any:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{what} must be a zgrad Tensor, got {type(tensor).__name__}")
    check_dtype(tensor._data, what)
    return tensor._data


def _group_rank(pg: ProcessGroup, rank: int, what: str) -> int:
    if rank not in pg.ranks:
        raise ValueError(f"{what}={rank} is not a rank of {pg.group_name} (ranks {list(pg.ranks)})")
    return pg.ranks.index(rank)


def all_reduce(tensor: Tensor, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` across the group, in place on every rank (``op``: a :class:`ReduceOp`).

    Small tensors (``[ddp] small_tensor_kb``) take one hop; larger ones a ring (reduce-scatter,
    then all-gather) in chunks of ``[ddp] chunk_kb``. Blocks unless ``async_op``.

    Raises:
        CollectiveError: the ranks called different collectives ("Detected mismatch between
            collectives on ranks ...", on every rank), or another rank failed this one.
        ZgradTimeoutError: the group's timeout passed; names the ranks not heard from.
        WorkerUnavailableError: a rank of the group died.
    """
    pg = _resolve(group)
    if pg is None:
        return None
    return ops.all_reduce(pg, _array(tensor, "all_reduce tensor"), as_reduce_op(op), async_op, [tensor])


def broadcast(tensor: Tensor, src: int, group: Any = None, async_op: bool = False) -> Work | None:
    """Copy global rank ``src``'s ``tensor`` into ``tensor`` on every rank of the group. Blocks
    unless ``async_op``. Raises as :func:`all_reduce`; ValueError if ``src`` is not in the group."""
    pg = _resolve(group)
    if pg is None:
        return None
    return ops.broadcast(pg, _array(tensor, "broadcast tensor"), _group_rank(pg, src, "src"), async_op, [tensor])


def reduce(tensor: Tensor, dst: int, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` across the group into global rank ``dst``'s ``tensor`` (the others keep
    theirs). Blocks unless ``async_op``. Raises as :func:`all_reduce`."""
    pg = _resolve(group)
    if pg is None:
        return None
    return ops.reduce(pg, _array(tensor, "reduce tensor"), _group_rank(pg, dst, "dst"), as_reduce_op(op), async_op, [tensor])


def _same_as(items: Sequence[Tensor], like: Any, what: str, count: int) -> list[Any]:
    if len(items) != count:
        raise ValueError(f"{what} must hold one tensor per rank of the group ({count}), got {len(items)}")
    arrays = [_array(t, what) for t in items]
    for i, a in enumerate(arrays):
        if a.shape != like.shape or a.dtype != like.dtype:
            raise ValueError(f"{what}[{i}] has shape {list(a.shape)} and dtype {a.dtype}; expected {list(like.shape)} "
                             f"and {like.dtype}, as the tensor each rank contributes")
    return arrays


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: Any = None, async_op: bool = False) -> Work | None:
    """``tensor_list[i]`` = group rank i's ``tensor``. Blocks unless ``async_op``. Raises as
    :func:`all_reduce`; ValueError for a list that does not fit."""
    pg = _resolve(group)
    if pg is None:
        return None
    x = _array(tensor, "all_gather tensor")
    outs = _same_as(tensor_list, x, "all_gather tensor_list", pg.size())
    return ops.all_gather(pg, outs, x, async_op, list(tensor_list))


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: Any = None,
                           async_op: bool = False) -> Work | None:
    """``output_tensor`` = the ranks' ``input_tensor`` concatenated along dim 0 (or stacked: an
    output of shape ``(size, *input.shape)``). Blocks unless ``async_op``."""
    pg = _resolve(group)
    if pg is None:
        return None
    x = _array(input_tensor, "all_gather_into_tensor input")
    out = _array(output_tensor, "all_gather_into_tensor output")
    return ops.all_gather(pg, _split(out, x, pg.size(), "all_gather_into_tensor"), x, async_op, [output_tensor],
                          label="all_gather_into_tensor")


def _split(whole: Any, part: Any, n: int, what: str) -> list[Any]:
    """``whole`` as ``n`` views shaped like ``part`` (dim 0 concatenation or a new leading dim)."""
    if whole.dtype != part.dtype or whole.size != n * part.size or not whole.flags.c_contiguous:
        raise ValueError(f"{what}: the output must be a contiguous tensor of {n} x {part.size} elements of {part.dtype}, "
                         f"got shape {list(whole.shape)} of {whole.dtype}")
    rows = whole.reshape(n, -1)
    return [rows[i].reshape(part.shape) for i in range(n)]


def reduce_scatter(output: Tensor, input_list: list[Tensor], op: Any = ReduceOp.SUM, group: Any = None,
                   async_op: bool = False) -> Work | None:
    """``output`` = the reduction over the ranks of their ``input_list[my group rank]``. Blocks
    unless ``async_op``."""
    pg = _resolve(group)
    if pg is None:
        return None
    out = _array(output, "reduce_scatter output")
    inputs = _same_as(input_list, out, "reduce_scatter input_list", pg.size())
    return ops.reduce_scatter(pg, out, inputs, as_reduce_op(op), async_op, [output])


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: Any = ReduceOp.SUM, group: Any = None,  # noqa: A002
                          async_op: bool = False) -> Work | None:
    """:func:`reduce_scatter` with the inputs concatenated along dim 0 in one tensor."""
    pg = _resolve(group)
    if pg is None:
        return None
    out = _array(output, "reduce_scatter_tensor output")
    inputs = _split(_array(input, "reduce_scatter_tensor input"), out, pg.size(), "reduce_scatter_tensor")
    return ops.reduce_scatter(pg, out, inputs, as_reduce_op(op), async_op, [output], label="reduce_scatter_tensor")


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Work | None:
    """Block until every rank of the group has entered the barrier (unless ``async_op``).
    ``device_ids`` is accepted for compatibility."""
    pg = _resolve(group)
    if pg is None:
        return None
    return ops.barrier(pg, async_op)


def monitored_barrier(group: Any = None, timeout: Any = None, wait_all_ranks: bool = False) -> None:
    """A barrier whose rank 0 names the ranks that do not arrive within ``timeout`` (seconds or a
    ``timedelta``; default: the group's timeout). Blocks.

    Raises:
        ZgradTimeoutError: on rank 0 "Rank R failed to pass monitoredBarrier in T ms" (with
            ``wait_all_ranks``: "Ranks R1, R2 failed ..."); the other ranks then fail too.
    """
    pg = _resolve(group)
    if pg is None:
        return
    timeout_s = timeout_seconds(timeout)
    ops.monitored_barrier(pg, pg.world.timeout_s if timeout_s is None else timeout_s, wait_all_ranks)
