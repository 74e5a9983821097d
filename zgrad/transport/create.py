"""How a worker gets its mesh: :func:`create_mesh` checks the arguments and the configuration,
finds the transport and the CURVE keys, and builds a :class:`~zgrad.transport.mesh.Mesh`
(which opens nothing until it is bound or started)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from zgrad.config import Config
from zgrad.errors import ConfigError
from zgrad.transport import frames as fr
from zgrad.transport.base import EndpointRequest
from zgrad.transport.envelope import Envelope
from zgrad.transport.mesh import Mesh
from zgrad.transport.registry import TransportRegistry, default_registry
from zgrad.transport.security import load_curve_keys

__all__ = ["create_mesh"]


def create_mesh(
    config: Config,
    rank: int,
    world_size: int,
    name: str,
    *,
    on_message: Callable[[Envelope], None],
    on_peer_lost: Callable[[int, str], None],
    valid_kinds: Iterable[int],
    master_addr: str | None = None,
    master_port: int | None = None,
    registry: TransportRegistry | None = None,
    defer_cma_reads: bool = False,
    on_thread_start: Callable[[], None] | None = None,
    max_in_handlers: int = 16,
    on_late_reply: Callable[[int, int], None] | None = None,
    reply_kinds: Iterable[int] = (),
) -> Mesh:
    """Create (but do not start) this worker's mesh. Opens no socket and starts no thread.

    Args:
        config: the job configuration; ``[transport]``, ``[security]`` and ``[[workers]]`` are read.
        rank: this worker's rank, ``0 <= rank < world_size``.
        world_size: number of workers in the job.
        name: this worker's unique name (must equal ``workers[rank].name`` if the config lists workers).
        on_message: called with each inbound :class:`Envelope` on the thread that received it,
            the I/O role's leader (see ``role.py``), one message at a time in arrival order (each
            peer's messages in the order sent): the next message waits until this call returns
            or its thread loses the role. It may run a call itself; once what must happen in
            arrival order is done it calls ``mesh.role.allow_takeover()``, after which a standby
            thread takes the role over if it runs past ``transport.inline_budget_ms``; before
            it blocks it calls ``mesh.role.hand_off()``. May be called before :meth:`Mesh.start`
            returns, as soon as this worker has the worker table. Exceptions are logged and
            counted, not raised.
        on_peer_lost: called on the I/O thread with ``(rank, reason)`` once per peer that died,
            went silent past ``heartbeat_timeout_s``, or was lost when the I/O thread failed.
        valid_kinds: the message kinds the layer above sends and accepts, each in
            ``0 .. 0xFEFF``; any other inbound kind is rejected as bad input.
        master_addr: rank 0's host for torchrun-style rendezvous (``MASTER_ADDR``), read from the
            environment by the caller, never here.
        master_port: rank 0's port for that rendezvous (``MASTER_PORT``); rank 0 binds it.
        registry: where to look up ``[transport] kind``; the process-wide one by default.
        defer_cma_reads: hand buffers that arrive by cross-memory attach to ``on_message``
            unread, as :class:`~zgrad.transport.cma.RemoteRead` handles that the consumer reads
            (on its own thread, into their destination) or releases; see ``docs/transport.md``.
        on_thread_start: called first in every thread of the I/O role (e.g. to bind the layer
            above to it).
        max_in_handlers: how many ``on_message`` calls that ran past the budget may go on in
            threads of their own (beyond that, inbound messages wait for them).
        on_late_reply: called with ``(rank, request_id)`` of each reply to a request of
            :meth:`Mesh.call` or :meth:`Mesh.post` that came after its caller gave up and was
            dropped, on the thread that read it.
        reply_kinds: the kinds among ``valid_kinds`` that only ever answer a request (sent with
            :meth:`Mesh.reply`): a reply of such a kind to a request that went over the link
            (one with ``transport.direct_max_kb`` of buffers or more) is handed to the thread
            that waits for it instead of ``on_message``. Empty: such requests cannot be
            answered to their waiter; give them for any layer that uses ``call`` or ``post``.

    Returns:
        A :class:`Mesh` in the created state.

    Raises:
        ConfigError: unknown transport (the message lists the known ones), CURVE on a transport
            without it, missing key files, a ``[[workers]]`` list that does not fit, or no way
            to find rank 0.
        ValueError: ``rank``, ``world_size`` or ``valid_kinds`` out of range.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"mesh rank must be in 0..world_size-1 with world_size >= 1; got rank={rank}, world_size={world_size}")
    kinds = frozenset(valid_kinds)
    bad = sorted(k for k in kinds if not (isinstance(k, int) and 0 <= k <= fr.MAX_USER_KIND))
    if bad:
        raise ValueError(f"valid_kinds must be integers in 0..{fr.MAX_USER_KIND:#x} (0xFF00 and up are the transport's); got {bad}")
    replies = frozenset(reply_kinds)
    if not replies <= kinds:
        raise ValueError(f"reply_kinds must be among valid_kinds; not there: {sorted(replies - kinds)}")
    workers = config.workers
    if workers and len(workers) != world_size:
        raise ConfigError(f"the config lists {len(workers)} [[workers]] but world_size is {world_size}; list every worker or none")
    if workers and workers[rank].name != name:
        raise ConfigError(f"worker name {name!r} does not match the config's workers[{rank}].name {workers[rank].name!r}")
    transport = (registry or default_registry()).get(config.transport.kind)
    keys = None
    if config.security.curve:
        if not transport.supports_curve:
            raise ConfigError(
                f"config key 'security.curve' = true is not available over transport {transport.name!r}: use tcp or ipc"
            )
        keys = load_curve_keys(config.security.key_dir, rank, world_size)
    request = EndpointRequest(config, rank, name, master_addr, master_port)
    rank0_endpoint = transport.rank0_endpoint(request) if rank != 0 else None
    if rank != 0 and rank0_endpoint is None:
        raise ConfigError(
            f"worker {name!r} (rank {rank}) cannot find rank 0 over {transport.name!r}: pass master_addr and "
            "master_port (MASTER_ADDR / MASTER_PORT) or list every worker with a port in [[workers]]"
        )
    return Mesh(config, request, world_size, transport, keys, rank0_endpoint, kinds, on_message, on_peer_lost,
                defer_cma_reads, on_thread_start, max_in_handlers, on_late_reply, replies)
