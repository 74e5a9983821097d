"""Check every gradient before it enters a node, like PyTorch's ``validate_outputs``."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from zgrad.engine.graph import Edge, Node
from zgrad.errors import AutogradError
from zgrad.kernels import dispatch
from zgrad.kernels.promotion import is_floating

__all__ = ["validate_gradients", "GraphGradients"]


class GraphGradients(Protocol):
    """The gradient arithmetic of a pass with ``create_graph=True``, whose gradients are tensors
    recorded on the graph (the autograd layer provides it: the engine knows arrays only)."""

    def zeros(self, shape: tuple[int, ...], dtype: Any, device_type: str) -> Any:
        """A zero gradient."""

    def add(self, a: Any, b: Any) -> Any:
        """``a + b``, recorded."""

    def sum_to(self, grad: Any, shape: tuple[int, ...]) -> Any:
        """``grad`` summed down to ``shape`` (which broadcasts to its shape), recorded."""

    def cast(self, grad: Any, dtype: Any) -> Any:
        """``grad`` as ``dtype``, recorded."""

    def device_type_of(self, grad: Any) -> str:
        """``"cpu"`` or ``"cuda"``."""

    def array_of(self, grad: Any) -> Any:
        """The array ``grad`` holds, to look at (anomaly detection's NaN check)."""

    def apply(self, node: Node, grads: list[Any]) -> Sequence[Any]:
        """Run ``node``'s backward on tensor gradients, recording it."""

    def accumulate(self, variable: Any, grad: Any) -> None:
        """Add ``grad`` into leaf ``variable``'s ``.grad`` (which keeps its graph)."""


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _broadcastable_to(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """Whether ``dst`` broadcasts to ``src`` (so ``src`` can be summed down to ``dst``)."""
    if len(dst) > len(src):
        return False
    for s, d in zip(reversed(src), reversed(dst)):
        if d != 1 and d != s:
            return False
    return True


def validate_gradients(node: Node, edges: Sequence[Edge | None], grads: Sequence[Any],
                       graph: GraphGradients | None = None) -> list[Any]:
    """Return ``grads`` checked and conformed to the metadata of the nodes they flow into.

    A gradient whose shape broadcasts from the expected shape is summed down to it; a floating
    gradient of another dtype is cast to the expected dtype. With ``graph`` (create_graph), the
    gradients are tensors and those steps are recorded.

    Raises:
        AutogradError: wrong number of gradients, a non-array gradient, a shape that is not
            compatible, a non-floating dtype, or a gradient on another device; the message names
            the node, the index, what was got and what was expected.
    """
    if len(grads) != len(edges):
        raise AutogradError(
            f"Function {node.name} returned an incorrect number of gradients (expected {len(edges)}, got {len(grads)})"
        )
    checked = list(grads)
    for i, (edge, grad) in enumerate(zip(edges, grads)):
        if edge is None or grad is None:
            continue
        meta = edge.node.input_metadata[edge.input_nr]
        if type(grad) is np.ndarray and grad.shape == meta.shape and grad.dtype == meta.dtype \
                and meta.device_type == "cpu":
            continue  # the common case, already conforming
        if not _is_array(grad):
            raise AutogradError(
                f"Function {node.name} returned an invalid gradient at index {i} - expected an array or None, "
                f"got {type(grad).__name__}"
            )
        if grad.shape != meta.shape:
            if not _broadcastable_to(grad.shape, meta.shape):
                raise AutogradError(
                    f"Function {node.name} returned an invalid gradient at index {i} - got {list(grad.shape)} "
                    f"but expected shape compatible with {list(meta.shape)}"
                )
            grad = dispatch.sum_to(grad, meta.shape) if graph is None else graph.sum_to(grad, meta.shape)
        if grad.dtype != meta.dtype:
            if not is_floating(grad.dtype) or not is_floating(meta.dtype):
                raise AutogradError(
                    f"Function {node.name} returned an invalid gradient at index {i} - expected dtype "
                    f"{meta.dtype} but got {grad.dtype}"
                )
            grad = dispatch.cast(grad, meta.dtype) if graph is None else graph.cast(grad, meta.dtype)
        device_type = dispatch.device_type_of(grad) if graph is None else graph.device_type_of(grad)
        if device_type != meta.device_type:
            raise AutogradError(
                f"Function {node.name} returned an invalid gradient at index {i} - expected device "
                f"{meta.device_type} but got {device_type}"
            )
        checked[i] = grad
    return checked
