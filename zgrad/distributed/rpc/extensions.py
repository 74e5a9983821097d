"""Hooks run on every new agent: how higher parts (distributed autograd) attach their message
handlers without the RPC layer importing them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from zgrad.distributed.rpc.agent import RpcAgent

__all__ = ["add_agent_hook", "run_agent_hooks"]

_hooks: list[Callable[["RpcAgent"], None]] = []


def add_agent_hook(hook: Callable[["RpcAgent"], None]) -> None:
    """Call ``hook(agent)`` for every agent started from now on (idempotent per hook)."""
    if hook not in _hooks:
        _hooks.append(hook)


def run_agent_hooks(agent: "RpcAgent") -> None:
    for hook in _hooks:
        hook(agent)
