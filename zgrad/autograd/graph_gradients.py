"""The gradient arithmetic of a backward pass with ``create_graph=True`` (double backward).

Such a pass hands each node tensors, not arrays, and records what it computes: the gradients it
returns have graphs of their own, which a second backward pass differentiates. The engine knows
arrays only; it asks :data:`TENSOR_GRADIENTS` for each step it takes on gradients (sum two that
meet, sum one down to its input's shape, cast, make zeros, run a node, accumulate into a leaf).
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.autograd.function import FunctionCtx
from zgrad.autograd.view_gradients import view_node_with_graph
from zgrad.engine.graph import GraphRoot, Node
from zgrad.engine.view_history import ViewOfBase, WriteThroughView
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch
from zgrad.tensor import Tensor

__all__ = ["TensorGradients", "TENSOR_GRADIENTS"]


class TensorGradients:
    """:class:`zgrad.engine.validate.GraphGradients` on tensors; every step is a recorded op."""

    def zeros(self, shape: tuple[int, ...], dtype: Any, device_type: str) -> Tensor:
        return Tensor(dispatch.full(shape, 0, dtype, device_type))

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        return a + b

    def sum_to(self, grad: Tensor, shape: tuple[int, ...]) -> Tensor:
        dims = dispatch.broadcast_axes(grad.shape, shape)
        return (grad.sum(dim=dims, keepdim=True) if dims else grad).reshape(shape)

    def cast(self, grad: Tensor, dtype: Any) -> Tensor:
        return grad.to(dtype)

    def device_type_of(self, grad: Tensor) -> str:
        return grad.device.type

    def array_of(self, grad: Tensor) -> Any:
        return grad._data

    def apply(self, node: Node, grads: list[Any]) -> Sequence[Any]:
        if isinstance(node, FunctionCtx):
            return node.apply_with_graph(grads)
        if type(node) is GraphRoot:
            return node.apply(grads)
        if isinstance(node, (WriteThroughView, ViewOfBase)):
            return view_node_with_graph(node, grads)
        raise AutogradError(f"{node.name}: double backward (create_graph=True) is not supported through this node")

    def accumulate(self, variable: Tensor, grad: Tensor) -> None:
        variable._accumulate_grad(grad)


TENSOR_GRADIENTS = TensorGradients()
