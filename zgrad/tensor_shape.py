"""The shape methods of :class:`zgrad.Tensor` beyond the core layout ones of
:mod:`zgrad.tensor_math`: triangles and diagonals, flips and rolls, repeats, moved and swapped
dims, narrowing, unbinding and splitting, with the in-place ``tril_`` and ``triu_``.

Each method is the ``zgrad.ops`` function of the same name applied to the tensor; bound onto
``Tensor`` by :func:`~zgrad.tensor.tensor_methods` when this module is imported (``zgrad/__init__.py``
imports it with the other method modules).
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad import tensor_inplace  # noqa: F401 - binds Tensor._inplace, which tril_ and triu_ use
from zgrad.kernels import dispatch_pointwise
from zgrad.ops import joining, layout, reorder, triangular
from zgrad.tensor import Tensor, tensor_methods

__all__ = ["TensorShape"]


@tensor_methods
class TensorShape:
    """The shape methods of :class:`zgrad.Tensor` named in the module docstring (bound onto it;
    never instantiated)."""

    # --- triangles and diagonals ----------------------------------------------------------------

    def tril(self, diagonal: int = 0) -> Any:
        return triangular.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> Any:
        return triangular.triu(self, diagonal)

    def _triangle_(self, make: Any, diagonal: int) -> Any:
        return self._inplace(lambda: dispatch_pointwise.write(self._data, make(Tensor(self._data), diagonal)._data),
                             lambda old: make(old, diagonal))

    def tril_(self, diagonal: int = 0) -> Any:
        """Zero the elements above the ``diagonal``-th diagonal, in place."""
        return self._triangle_(triangular.tril, diagonal)

    def triu_(self, diagonal: int = 0) -> Any:
        """Zero the elements below the ``diagonal``-th diagonal, in place."""
        return self._triangle_(triangular.triu, diagonal)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        return triangular.diagonal(self, offset, dim1, dim2)

    def diag(self, diagonal: int = 0) -> Any:
        return triangular.diag(self, diagonal)

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
        return triangular.diag_embed(self, offset, dim1, dim2)

    def trace(self) -> Any:
        return triangular.trace(self)

    # --- reordered and repeated copies ----------------------------------------------------------

    def flip(self, *dims: Any) -> Any:
        return reorder.flip(self, dims[0] if len(dims) == 1 else dims)

    def fliplr(self) -> Any:
        return reorder.fliplr(self)

    def flipud(self) -> Any:
        return reorder.flipud(self)

    def roll(self, shifts: Any, dims: Any = None) -> Any:
        return reorder.roll(self, shifts, dims)

    def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> Any:
        return reorder.rot90(self, k, dims)

    def repeat(self, *sizes: Any) -> Any:
        return reorder.repeat(self, *sizes)

    def tile(self, *dims: Any) -> Any:
        return reorder.tile(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)

    def repeat_interleave(self, repeats: Any, dim: int | None = None, *, output_size: int | None = None) -> Any:
        return reorder.repeat_interleave(self, repeats, dim, output_size=output_size)

    # --- views ----------------------------------------------------------------------------------

    def movedim(self, source: Any, destination: Any) -> Any:
        return layout.movedim(self, source, destination)

    moveaxis = movedim

    def swapaxes(self, axis0: int, axis1: int) -> Any:
        return layout.swapaxes(self, axis0, axis1)

    def swapdims(self, dim0: int, dim1: int) -> Any:
        return layout.swapdims(self, dim0, dim1)

    def narrow(self, dim: int, start: Any, length: int) -> Any:
        return layout.narrow(self, dim, start, length)

    def unbind(self, dim: int = 0) -> tuple[Any, ...]:
        return layout.unbind(self, dim)

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Any:
        return layout.unflatten(self, dim, sizes)

    def broadcast_to(self, size: Sequence[int]) -> Any:
        return layout.broadcast_to(self, size)

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple[Any, ...]:
        return joining.tensor_split(self, indices_or_sections, dim)

    def hsplit(self, indices_or_sections: Any) -> tuple[Any, ...]:
        return joining.hsplit(self, indices_or_sections)

    def vsplit(self, indices_or_sections: Any) -> tuple[Any, ...]:
        return joining.vsplit(self, indices_or_sections)

    def dsplit(self, indices_or_sections: Any) -> tuple[Any, ...]:
        return joining.dsplit(self, indices_or_sections)
