"""Which RPC agent a thread talks through.

Normally a process runs one worker and so one agent. With the ``inproc`` transport several
workers run as threads of one process; each agent is then bound to the thread that called
``init_rpc`` and to its own pool threads. A thread bound to none uses the process's only agent.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from zgrad.errors import ZgradError

if TYPE_CHECKING:
    from zgrad.distributed.rpc.agent import RpcAgent

__all__ = ["current_agent", "bind_thread", "register_agent", "unregister_agent", "NOT_INITIALIZED"]

NOT_INITIALIZED = (
    "RPC has not been initialized. Call zgrad.distributed.rpc.init_rpc(name, rank=..., world_size=...) "
    "(or start the job with zgrad-launch) before using RPC."
)


class _Registry(threading.local):
    bound: "RpcAgent | None" = None


class _Agents:
    """The live agents of this process and each thread's binding."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.live: list["RpcAgent"] = []
        self.local = _Registry()


_agents = _Agents()


def bind_thread(agent: "RpcAgent | None") -> None:
    """Make ``agent`` the one the calling thread's RPC calls go through (None unbinds)."""
    _agents.local.bound = agent


def register_agent(agent: "RpcAgent") -> None:
    with _agents.lock:
        if any(a.name == agent.name for a in _agents.live):
            raise ZgradError(f"an RPC agent named {agent.name!r} already runs in this process; call shutdown() first")
        _agents.live.append(agent)
    bind_thread(agent)


def unregister_agent(agent: "RpcAgent") -> None:
    with _agents.lock:
        if agent in _agents.live:
            _agents.live.remove(agent)
    if _agents.local.bound is agent:
        bind_thread(None)


def current_agent() -> "RpcAgent":
    """The agent for the calling thread.

    Raises:
        ZgradError: RPC is not initialized (the message says how to fix it), or several agents
            run in this process and this thread is bound to none of them.
    """
    bound = _agents.local.bound
    if bound is not None and not bound._closed:
        return bound
    with _agents.lock:
        live = list(_agents.live)
    if len(live) == 1:
        return live[0]
    if not live:
        raise ZgradError(NOT_INITIALIZED)
    raise ZgradError(
        f"{len(live)} RPC agents run in this process ({', '.join(a.name for a in live)}) and this thread is bound "
        "to none: call RPC from the thread that ran init_rpc, or bind it with zgrad.distributed.rpc.bind_worker(name)"
    )


def agent_named(name: str) -> "RpcAgent":
    with _agents.lock:
        for agent in _agents.live:
            if agent.name == name:
                return agent
    raise ZgradError(f"no RPC agent named {name!r} runs in this process")
