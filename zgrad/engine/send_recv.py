"""The two nodes an RPC adds to the graph in a distributed autograd context.

A :class:`SendNode` sits on the worker that sent tensors requiring grad: its edges lead to those
tensors' nodes, and its input gradients arrive from the network. A :class:`RecvNode` is the
``grad_fn`` of the tensors a worker received: running it sends their gradients back. Each pair
shares an ``autograd_message_id``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from zgrad.engine.graph import Edge, InputMetadata, Node, NodeName

__all__ = ["SendNode", "RecvNode", "recv_sender", "RecvSender"]

RecvSender = Callable[["RecvNode", list[Any]], None]


class _RecvSenderSlot(threading.local):
    sender: RecvSender | None = None


recv_sender = _RecvSenderSlot()
"""Per thread: how a running :class:`RecvNode` hands its gradients to the distributed engine.
The engine sets it around each run of a graph task, so the messages a run sends are counted
against the work that caused them."""


class SendNode(Node):
    """Backward of sending tensors to ``peer``: passes the gradients that came back to the sent tensors."""

    def __init__(self, autograd_message_id: int, peer: int, edges: Sequence[Edge | None],
                 metadata: Sequence[InputMetadata]) -> None:
        super().__init__()
        self.autograd_message_id = autograd_message_id
        self.peer = peer
        self.next_edges = list(edges)
        self.input_metadata = list(metadata)

    @property
    def name(self) -> NodeName:
        return NodeName("SendRpcBackward")

    def apply(self, grads: Sequence[Any]) -> Sequence[Any]:
        return list(grads)

    def describe(self) -> str:
        return f"send function (autograd_message_id {self.autograd_message_id:#x}, to rank {self.peer})"


class RecvNode(Node):
    """Backward of receiving tensors from ``peer``: sends their gradients back to the matching send.

    It always runs once reached: outputs that got no gradient send zeros of the right shape.
    """

    always_run = True

    def __init__(self, autograd_message_id: int, peer: int, metadata: Sequence[InputMetadata]) -> None:
        super().__init__()
        self.autograd_message_id = autograd_message_id
        self.peer = peer
        self.input_metadata = list(metadata)

    @property
    def name(self) -> NodeName:
        return NodeName("RecvRpcBackward")

    def apply(self, grads: Sequence[Any]) -> Sequence[Any]:
        sender = recv_sender.sender
        if sender is None:
            raise RuntimeError(
                "RecvRpcBackward reached outside a distributed backward pass: use "
                "zgrad.distributed.autograd.backward(context_id, roots) for graphs that span RPCs"
            )
        sender(self, list(grads))
        return ()
