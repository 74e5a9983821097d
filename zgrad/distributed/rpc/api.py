"""The public RPC functions; each works through the calling thread's agent (see ``state.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from zgrad.config import Config
from zgrad.distributed.rpc.agent import RpcAgent
from zgrad.distributed.rpc.env import resolve_init
from zgrad.distributed.rpc.options import BackendType, TensorPipeRpcBackendOptions
from zgrad.distributed.rpc.rref import RRef
from zgrad.distributed.rpc.shared_rendezvous import rendezvous_port_beside_process_group
from zgrad.distributed.rpc.state import bind_thread, current_agent, register_agent, unregister_agent
from zgrad.distributed.rpc.worker_info import WorkerInfo
from zgrad.errors import ConfigError, WorkerUnavailableError
from zgrad.futures import Future
from zgrad.kernels.host_memory import leave_host_allocator, tune_host_allocator

__all__ = ["init_rpc", "shutdown", "rpc_sync", "rpc_async", "remote", "get_worker_info", "get_debug_info", "bind_worker"]

WorkerRef = "str | int | WorkerInfo"


def init_rpc(name: str | None = None, rank: int | None = None, world_size: int | None = None,
             config: "str | dict | Config | None" = None, *, backend: "BackendType | str | None" = None,
             rpc_backend_options: TensorPipeRpcBackendOptions | None = None) -> None:
    """Start this worker's RPC agent and join the mesh of ``world_size`` workers. Blocks until all
    have joined (at most ``[transport] connect_timeout_s``).

    Unless ``[memory] tune_malloc = false``, it also tunes glibc's malloc for this process so that
    freed tensor memory is reused rather than returned (``zgrad/kernels/host_memory.py``).

    Args:
        name: unique worker name (default: ``ZGRAD_WORKER_NAME``, or the ``[[workers]]`` entry of ``rank``).
        rank: this worker's rank (default: ``ZGRAD_RANK``, then ``RANK``, then found by name in the config).
        world_size: number of workers (default: ``ZGRAD_WORLD_SIZE``, ``WORLD_SIZE``, or the config's workers).
        config: a TOML path, a dict of the TOML's sections, or a parsed config (default: ``ZGRAD_CONFIG``).
        backend: PyTorch's backend name (``BackendType.TENSORPIPE``), accepted for compatibility:
            every backend is zgrad's mesh, of the transport the config names.
        rpc_backend_options: PyTorch's ``TensorPipeRpcBackendOptions``: thread count, default
            timeout and ``init_method`` override the config (``options.py``).

    Raises:
        ConfigError: a missing or inconsistent setting.
        TransportError: the mesh could not form in time; the message names the missing workers.

    Example::

        rpc.init_rpc("worker0", rank=0, world_size=2, config={"transport": {"kind": "tcp"}})
    """
    _check_backend(backend)
    plan = resolve_init(name, rank, world_size, config, options=rpc_backend_options)
    if not plan.config.workers:  # rank 0's address is the rendezvous: a process group may hold it
        shared = rendezvous_port_beside_process_group(plan.master_addr, plan.master_port, plan.rank, plan.world_size)
        if shared is not None:
            plan = dataclasses.replace(plan, master_port=shared)
    memory = plan.config.memory
    if memory.tune_malloc:
        tune_host_allocator(memory.keep_free_mb)
    else:
        leave_host_allocator()
    agent = RpcAgent(plan)
    from zgrad.distributed.autograd.attach import attach

    attach(agent)
    register_agent(agent)
    try:
        agent.start()
    except BaseException:
        unregister_agent(agent)
        agent.close()
        raise


def _check_backend(backend: Any) -> None:
    if backend is None or isinstance(backend, BackendType):
        return
    if isinstance(backend, str) and backend.upper() in BackendType.__members__:
        return
    raise ConfigError(f"unknown RPC backend {backend!r}; expected one of {', '.join(BackendType.__members__)} "
                      "(all are zgrad's ZeroMQ mesh; pick its transport in the config's [transport] kind)")


def shutdown(graceful: bool = True, timeout: float | None = None) -> None:
    """Stop this worker's agent, closing every thread and socket; ``init_rpc`` may then run again.

    With ``graceful`` it is a barrier: it returns once every worker has called it and no call is
    in flight anywhere, so nothing is lost. By default it waits as long as that takes (a worker
    may call it right after ``init_rpc`` while the others train for hours); a worker that dies
    ends the wait through heartbeats, and the survivors' ``shutdown`` raises naming it.

    Args:
        graceful: run the barrier first (False: close at once; calls in flight fail).
        timeout: seconds the barrier may take at most; None takes ``[rpc] shutdown_timeout_s``,
            and 0 (that key's default, as PyTorch's) means no bound.

    Raises:
        WorkerUnavailableError: some worker died before the barrier (after closing everything).
        ZgradTimeoutError: the barrier did not complete in time (after closing everything).
    """
    agent = current_agent()
    timeout_s = agent.config.rpc.shutdown_timeout_s if timeout is None else float(timeout)
    dead: list[str] = []
    try:
        if graceful:
            dead = agent.shutdown_barrier.run(timeout_s if timeout_s > 0 else None)
    finally:
        unregister_agent(agent)
        agent.close()
    if dead:
        raise WorkerUnavailableError(f"shutdown of {agent.name!r} completed without worker(s) {', '.join(dead)}, which died")


def rpc_async(to: WorkerRef, func: Callable[..., Any], args: tuple = (), kwargs: dict | None = None,
              timeout: float = -1) -> Future:
    """Run ``func(*args, **kwargs)`` on worker ``to`` without blocking; returns a :class:`Future`.

    ``func`` is a module-level function or a class (called to construct an object) defined in a
    module the callee allows. ``timeout`` in seconds: -1 = ``[rpc] default_timeout_s``, 0 = none.

    Raises:
        CodecError / TargetError: an argument or ``func`` cannot be sent (at once, at the caller).
    """
    return current_agent().caller.call(to, func, args, kwargs, timeout)


def rpc_sync(to: WorkerRef, func: Callable[..., Any], args: tuple = (), kwargs: dict | None = None,
             timeout: float = -1) -> Any:
    """Run ``func(*args, **kwargs)`` on worker ``to`` and return its result. Blocks.

    Raises:
        RemoteError: ``func`` raised on ``to`` (also an instance of the original built-in type).
        ZgradTimeoutError: no result within ``timeout`` seconds (-1 = the configured default).
        WorkerUnavailableError: ``to`` died or is unreachable.
    """
    return current_agent().caller.call_sync(to, func, args, kwargs, timeout)


def remote(to: WorkerRef, func: Callable[..., Any], args: tuple = (), kwargs: dict | None = None,
           timeout: float = -1) -> RRef:
    """Run ``func`` on ``to`` and return at once an :class:`RRef` (owned by ``to``) to its result."""
    return current_agent().caller.remote(to, func, args, kwargs, timeout)


def get_worker_info(name: str | None = None) -> WorkerInfo:
    """The WorkerInfo of the worker called ``name`` (this worker when None)."""
    return current_agent().worker_info(name)


def get_debug_info(to: WorkerRef | None = None) -> dict[str, Any]:
    """Counters of this worker (or of worker ``to``, fetched over RPC): calls in flight, messages
    sent and received by kind, rejects, RRefs owned, transport statistics."""
    agent = current_agent()
    if to is None or agent.worker_info(to).id == agent.rank:
        return agent.debug_info()
    return agent.caller.call(to, collect_debug_info).wait()


def collect_debug_info() -> dict[str, Any]:
    """This worker's debug info (the RPC target behind ``get_debug_info(to)``)."""
    return current_agent().debug_info()


def bind_worker(name: str) -> None:
    """Bind the calling thread to the agent of worker ``name`` in this process (inproc jobs)."""
    from zgrad.distributed.rpc.state import agent_named

    bind_thread(agent_named(name))
