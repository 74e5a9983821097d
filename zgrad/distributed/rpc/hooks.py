"""What the RPC agent tells a layer built on it about the calls it carries: the call hooks.

Distributed autograd registers its hooks with :meth:`RpcAgent.register_call_hooks` (as it
registers its message handlers) to record a send node where tensors requiring grad leave inside
a context and a recv node where they arrive, and to run a call's target in the caller's context.
The agent calls them on every call and reply; it knows nothing of what they do. Until something
registers, :class:`NoCallHooks` answers.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

__all__ = ["CallHooks", "NoCallHooks"]


class CallHooks(Protocol):
    """The hooks of the layer above RPC (distributed autograd). Called on agent threads; never block."""

    def outgoing_call(self, dst: int, tensors: Sequence[Any]) -> dict[str, Any]:
        """Metadata to add to a CALL or RREF_FETCH the calling thread sends to ``dst``."""

    def call_failed(self, dst: int, meta: dict[str, Any]) -> None:
        """A CALL or RREF_FETCH with ``meta`` (extended by :meth:`outgoing_call`) failed at the
        caller without an answer (refused before it left, its peer lost, or timed out): what
        rode in it may not have arrived."""

    def incoming_call(self, src: int, meta: dict[str, Any], tensors: Sequence[Any]) -> Any:
        """The context a received CALL or RREF_FETCH runs in (opaque to the agent), or None."""

    def run_in_context(self, context: Any, func: Callable[..., Any], args: list, kwargs: dict) -> Any:
        """Run a call's target with ``context`` current (None: no context)."""

    def result_meta(self, context: Any, dst: int, tensors: Sequence[Any]) -> dict[str, Any]:
        """Metadata to add to the RESULT of a call that ran in ``context``."""

    def incoming_result(self, context_id: int | None, src: int, meta: dict[str, Any], tensors: Sequence[Any]) -> None:
        """A RESULT arrived for a call made in ``context_id`` (None: outside any context)."""

    def drain(self, timeout_s: float | None) -> bool:
        """Finish this layer's work before the agent shuts down (what it started in the background,
        what it still has to do), at most ``timeout_s``; True if done. Blocks; peers still answer."""


class NoCallHooks:
    """The hooks of an agent nothing is built on: calls carry nothing more."""

    def outgoing_call(self, dst: int, tensors: Sequence[Any]) -> dict[str, Any]:
        return {}

    def call_failed(self, dst: int, meta: dict[str, Any]) -> None:
        return None

    def incoming_call(self, src: int, meta: dict[str, Any], tensors: Sequence[Any]) -> Any:
        return None

    def run_in_context(self, context: Any, func: Callable[..., Any], args: list, kwargs: dict) -> Any:
        return func(*args, **kwargs)

    def result_meta(self, context: Any, dst: int, tensors: Sequence[Any]) -> dict[str, Any]:
        return {}

    def incoming_result(self, context_id: int | None, src: int, meta: dict[str, Any], tensors: Sequence[Any]) -> None:
        return None

    def drain(self, timeout_s: float | None) -> bool:
        return True
