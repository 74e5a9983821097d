"""The backward of the nodes that tie a tensor to its views after an in-place change
(:mod:`zgrad.engine.view_history`) as recorded ops, for a pass with ``create_graph=True``.

Taking a view's elements of a gradient and placing a gradient into a view's elements of zeros are
each other's adjoints; zeroing the view's elements is its own.
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.autograd.function import Op
from zgrad.engine.view_history import ViewOfBase, WriteThroughView
from zgrad.tensor import Tensor

__all__ = ["view_node_with_graph"]


class _GeometryMap(Op):
    """A gradient mapped by a view's geometry: the :class:`~zgrad.kernels.view_geometry.ViewGeometry`
    method ``forward_map``; the backward is its adjoint, ``adjoint_map``."""

    forward_map = adjoint_map = ""

    @classmethod
    def forward(cls, ctx, grad, geometry):
        ctx.geometry = geometry
        return getattr(geometry, cls.forward_map)(grad)

    @classmethod
    def backward(cls, ctx, grad):
        return getattr(ctx.geometry, cls.adjoint_map)(grad), None


class _TakeView(_GeometryMap):
    """The view's elements of a gradient of the base's shape."""

    forward_map, adjoint_map = "taken", "placed"


class _PlaceView(_GeometryMap):
    """A gradient of the view's shape placed into the view's elements of zeros of the base's shape."""

    forward_map, adjoint_map = "placed", "taken"


class _ZeroView(_GeometryMap):
    """A gradient of the base's shape with the view's elements zero."""

    forward_map = adjoint_map = "zeroed"


def view_node_with_graph(node: WriteThroughView | ViewOfBase, grads: Sequence[Tensor]) -> tuple[Any, ...]:
    """What ``node`` returns for tensor gradients ``grads``, recorded."""
    geometry, grad = node.geometry, grads[0]
    if isinstance(node, ViewOfBase):
        return (_PlaceView.apply(grad, geometry),)
    old_base, new_view = node.next_edges
    return (None if old_base is None else _ZeroView.apply(grad, geometry),
            None if new_view is None else _TakeView.apply(grad, geometry))
