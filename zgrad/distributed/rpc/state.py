"""Which RPC agent a thread talks through (:class:`~zgrad.distributed.binding.ThreadBinding`):
each agent is bound to the thread that called ``init_rpc`` and to its own pool threads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zgrad.distributed.binding import ThreadBinding
from zgrad.errors import ZgradError

if TYPE_CHECKING:
    from zgrad.distributed.rpc.agent import RpcAgent

__all__ = ["current_agent", "bind_thread", "register_agent", "unregister_agent", "NOT_INITIALIZED"]

NOT_INITIALIZED = (
    "RPC has not been initialized. Call zgrad.distributed.rpc.init_rpc(name, rank=..., world_size=...) "
    "(or start the job with zgrad-launch) before using RPC."
)


_agents: ThreadBinding["RpcAgent"] = ThreadBinding(lambda agent: not agent.caller.closed)


def bind_thread(agent: "RpcAgent | None") -> None:
    """Make ``agent`` the one the calling thread's RPC calls go through (None unbinds)."""
    _agents.bind(agent)


def register_agent(agent: "RpcAgent") -> None:
    def unique(live: list["RpcAgent"]) -> None:
        if any(a.name == agent.name for a in live):
            raise ZgradError(f"an RPC agent named {agent.name!r} already runs in this process; call shutdown() first")

    _agents.register(agent, unique)


def unregister_agent(agent: "RpcAgent") -> None:
    _agents.unregister(agent)


def current_agent() -> "RpcAgent":
    """The agent for the calling thread.

    Raises:
        ZgradError: RPC is not initialized (the message says how to fix it), or several agents
            run in this process and this thread is bound to none of them.
    """
    agent, live = _agents.current()
    if agent is not None:
        return agent
    if not live:
        raise ZgradError(NOT_INITIALIZED)
    raise ZgradError(
        f"{len(live)} RPC agents run in this process ({', '.join(a.name for a in live)}) and this thread is bound "
        "to none: call RPC from the thread that ran init_rpc, or bind it with zgrad.distributed.rpc.bind_worker(name)"
    )


def agent_named(name: str) -> "RpcAgent":
    for agent in _agents.live():
        if agent.name == name:
            return agent
    raise ZgradError(f"no RPC agent named {name!r} runs in this process")
