"""The backward nodes that keep a tensor and its views consistent once one of them is changed in
place (PyTorch's ``CopySlices`` and the regenerated ``AsStridedBackward`` of a view).

``b = a * 2; b[1:].mul_(3)`` changes ``b``'s memory through a view. The view's new value is the
in-place op's result; ``b`` becomes its old value with that result written into the view's
elements (:class:`WriteThroughView`): its gradient goes to the old ``b`` everywhere but in those
elements, and from them to the result. A view whose base was changed since its history was made
takes a new history: its elements of the base (:class:`ViewOfBase`).
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad.engine.graph import Edge, InputMetadata, Node, NodeName
from zgrad.kernels import dispatch, dispatch_pointwise
from zgrad.kernels.view_geometry import ViewGeometry

__all__ = ["WriteThroughView", "ViewOfBase"]


class WriteThroughView(Node):
    """The base of a view after the view was changed in place: the base's old value (``next_edges[0]``)
    with the view's new one (``next_edges[1]``) in the view's elements."""

    def __init__(self, geometry: ViewGeometry, old_base: Edge | None, new_view: Edge | None, base: Any) -> None:
        super().__init__()
        self.geometry = geometry
        self.next_edges = [old_base, new_view]
        self.input_metadata = [InputMetadata.of(base)]

    @property
    def name(self) -> NodeName:
        return NodeName("CopySlices")

    def apply(self, grads: Sequence[Any]) -> Sequence[Any]:
        if self.next_edges[0] is None:
            return None, self.geometry.taken(grads[0])
        whole, region = self.geometry.spread(grads[0])
        view_grad = dispatch.cast(region, region.dtype) if self.next_edges[1] is not None else None
        dispatch_pointwise.write(region, 0)
        return whole, view_grad


class ViewOfBase(Node):
    """A view's elements of its base (``next_edges[0]``), for a view whose base changed in place
    after the view was made."""

    def __init__(self, geometry: ViewGeometry, base: Edge, view: Any) -> None:
        super().__init__()
        self.geometry = geometry
        self.next_edges = [base]
        self.input_metadata = [InputMetadata.of(view)]

    @property
    def name(self) -> NodeName:
        return NodeName("AsStridedBackward0")

    def apply(self, grads: Sequence[Any]) -> Sequence[Any]:
        return (self.geometry.placed(grads[0]),)
