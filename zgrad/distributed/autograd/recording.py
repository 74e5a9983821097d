"""Forward recording: attach a send node where tensors requiring grad leave a worker, and a recv
node (as their ``grad_fn``) where they arrive, under one ``autograd_message_id``."""

from __future__ import annotations

from typing import Sequence

from zgrad.engine.dist.context import ContextContainer, DistAutogradContext
from zgrad.engine.grad_mode import is_grad_enabled
from zgrad.engine.graph import InputMetadata
from zgrad.engine.send_recv import RecvNode, SendNode
from zgrad.errors import ProtocolError
from zgrad.tensor import Tensor, gradient_edge

__all__ = ["record_send", "record_recv"]


def record_send(contexts: ContextContainer, ctx: DistAutogradContext, peer: int, tensors: Sequence[Tensor]) -> int | None:
    """Record that ``tensors`` go to ``peer``; returns the new autograd_message_id, or None when
    none of them requires grad (the peer is remembered either way, for release)."""
    ctx.add_known_worker(peer)
    needing = [t for t in tensors if t.requires_grad]
    if not needing or not is_grad_enabled():
        return None
    message_id = contexts.new_message_id()
    ctx.add_send(SendNode(message_id, peer, [gradient_edge(t) for t in needing],
                          [InputMetadata.of(t._data) for t in needing]))
    return message_id


def record_recv(ctx: DistAutogradContext, peer: int, message_id: int | None, tensors: Sequence[Tensor]) -> None:
    """Make a recv node the ``grad_fn`` of the received ``tensors`` that require grad.

    Raises:
        ProtocolError: a message id came without any tensor requiring grad.
    """
    ctx.add_known_worker(peer)
    if message_id is None:
        return
    needing = [t for t in tensors if t.requires_grad]
    if not needing:
        raise ProtocolError(f"autograd_message_id {message_id:#x} arrived without a tensor that requires grad")
    node = RecvNode(message_id, peer, [InputMetadata.of(t._data) for t in needing])
    for output_nr, tensor in enumerate(needing):
        tensor.grad_fn = node
        tensor._output_nr = output_nr
    ctx.add_recv(node)
