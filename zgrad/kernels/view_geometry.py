"""Where a view's elements lie among those of the array it views, on the host and on CUDA alike:
what autograd needs to carry a gradient between a tensor and its views once one of them was
changed in place (PyTorch's ``CopySlices`` and ``AsStridedBackward``).

A view and the array it views share one allocation. :class:`ViewGeometry` records both as
(shape, strides, offset) in elements within the span of memory the viewed array covers, so that
the same layout can be made again in fresh memory of that span, for a gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from zgrad.kernels import dispatch, dispatch_pointwise

__all__ = ["ViewGeometry", "memory_owner", "shares_allocation"]


def memory_owner(array: np.ndarray) -> np.ndarray:
    """The host array owning ``array``'s memory: the last numpy array of its chain of bases
    (``array`` itself when it owns its memory).

    The chain is walked by exact type, as numpy collapses it: a view of a view has the owner as
    its ``base``, but a subclass (``np.memmap``) or a foreign buffer ends a link.
    """
    base = array.base
    while type(base) is np.ndarray:
        array = base
        base = array.base
    return array


def _allocation(array: Any) -> Any:
    """The object owning ``array``'s memory: the host array owning it, or a device array's
    allocation; None for anything else."""
    if isinstance(array, np.ndarray):
        return memory_owner(array)
    return getattr(array, "_base", None) if dispatch.device_type_of(array) == "cuda" else None


def _byte_offset(array: Any, allocation: Any) -> int:
    """Where ``array``'s first element lies in ``allocation``, in bytes."""
    if isinstance(array, np.ndarray):
        return array.__array_interface__["data"][0] - allocation.__array_interface__["data"][0]
    return array._offset()


def shares_allocation(view: Any, base: Any) -> bool:
    """Whether arrays ``view`` and ``base`` lie in the same allocation."""
    if type(view) is np.ndarray:  # memory_owner written out: every view op of a model asks
        owner = view.base
        if owner is None or type(base) is not np.ndarray:
            return False
        if type(owner) is not np.ndarray:
            owner = view
        while type(owner.base) is np.ndarray:
            owner = owner.base
        while type(base.base) is np.ndarray:
            base = base.base
        return owner is base
    allocation = _allocation(base)
    return allocation is not None and _allocation(view) is allocation


def _extent(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int]:
    """The lowest and highest offsets (in elements, from the first element) a layout reaches."""
    low = high = 0
    for n, step in zip(shape, strides):
        if n == 0:
            return 0, -1
        if step < 0:
            low += (n - 1) * step
        else:
            high += (n - 1) * step
    return low, high


@dataclass(frozen=True)
class ViewGeometry:
    """A viewed array's layout and one view's of it, in elements, within ``span`` elements of memory
    (the viewed array's reach)."""

    base_shape: tuple[int, ...]
    base_strides: tuple[int, ...]
    base_offset: int
    view_shape: tuple[int, ...]
    view_strides: tuple[int, ...]
    view_offset: int
    span: int

    @classmethod
    def of(cls, view: Any, base: Any) -> "ViewGeometry":
        """The geometry of array ``view``, a view of array ``base`` (same allocation and dtype)."""
        itemsize = base.itemsize
        allocation = _allocation(base)
        base_strides = tuple(s // itemsize for s in base.strides)
        view_strides = tuple(s // itemsize for s in view.strides)
        start = _byte_offset(base, allocation) // itemsize
        low, high = _extent(base.shape, base_strides)
        return cls(tuple(base.shape), base_strides, -low, tuple(view.shape), view_strides,
                   _byte_offset(view, allocation) // itemsize - start - low, max(high - low + 1, 1))

    def _layouts(self, memory: Any) -> tuple[Any, Any]:
        """The base's and the view's layouts over ``memory`` (1-D, ``span`` elements)."""
        itemsize = memory.itemsize
        base = _strided(memory[self.base_offset:], self.base_shape, tuple(s * itemsize for s in self.base_strides))
        view = _strided(memory[self.view_offset:], self.view_shape, tuple(s * itemsize for s in self.view_strides))
        return base, view

    def spread(self, grad: Any) -> tuple[Any, Any]:
        """A copy of ``grad`` (an array of the base's shape) in fresh memory laid out as the base, and
        the view's elements of that copy (a view of it)."""
        memory = dispatch.empty((self.span,), grad.dtype, dispatch.device_type_of(grad))
        whole, region = self._layouts(memory)
        dispatch.copy_into(whole, grad)
        return whole, region

    def taken(self, grad: Any) -> Any:
        """The view's elements of ``grad`` (an array of the base's shape), in an array of their own."""
        region = self.spread(grad)[1]
        return dispatch.cast(region, region.dtype)

    def zeroed(self, grad: Any) -> Any:
        """A copy of ``grad`` (an array of the base's shape) with the view's elements zero."""
        whole, region = self.spread(grad)
        dispatch_pointwise.write(region, 0)
        return whole

    def placed(self, grad: Any) -> Any:
        """An array of the base's shape, zero but for ``grad`` (of the view's shape) in the view's
        elements; an element the view reads several times (an expanded view's) takes their sum."""
        memory = dispatch.full((self.span,), 0, grad.dtype, dispatch.device_type_of(grad))
        whole, region = self._layouts(memory)
        repeated = [i for i, (n, step) in enumerate(zip(self.view_shape, self.view_strides)) if step == 0 and n > 1]
        if repeated:
            once = tuple(1 if i in repeated else n for i, n in enumerate(self.view_shape))
            grad = dispatch.sum_to(grad, once)
            region = _strided(region, once, region.strides)
        dispatch.copy_into(region, grad)
        return whole


def _strided(array: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    if isinstance(array, np.ndarray):
        return np.lib.stride_tricks.as_strided(array, shape, strides)
    return array.as_strided(shape, strides)
