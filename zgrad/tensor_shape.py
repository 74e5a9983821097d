"""The shape methods of :class:`zgrad.Tensor` beyond the core layout ones of
:mod:`zgrad.tensor_math`: triangles and diagonals, flips and rolls, repeats and windows, moved
and swapped dims (``mT``, ``mH``, ``H``), narrowing, selecting, unbinding and splitting, with
the in-place ``tril_`` and ``triu_`` and the in-place layout changes ``squeeze_``,
``unsqueeze_``, ``t_``, ``transpose_``, ``swapaxes_`` and ``swapdims_``.

Each method is the ``zgrad.ops`` function of the same name applied to the tensor; bound onto
``Tensor`` by :func:`~zgrad.tensor.tensor_methods` when this module is imported (``zgrad/__init__.py``
imports it with the other method modules).
"""

from __future__ import annotations

from typing import Any, Sequence

from zgrad import tensor_inplace  # noqa: F401 - binds Tensor._inplace, which tril_ and triu_ use
from zgrad import ops
from zgrad.errors import ShapeError
from zgrad.kernels import dispatch_pointwise
from zgrad.ops import joining, layout, reorder, triangular, view_scatter
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

    def diagflat(self, offset: int = 0) -> Any:
        return triangular.diagflat(self, offset)

    def trace(self) -> Any:
        return triangular.trace(self)

    # --- reordered and repeated copies ----------------------------------------------------------

    def flip(self, *dims: Any) -> Any:
        return reorder.flip(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int) else dims)

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

    def unfold(self, dimension: int, size: int, step: int) -> Any:
        return reorder.unfold(self, dimension, size, step)

    # --- views ----------------------------------------------------------------------------------

    def movedim(self, source: Any, destination: Any) -> Any:
        return layout.movedim(self, source, destination)

    moveaxis = movedim

    def swapaxes(self, axis0: int, axis1: int) -> Any:
        return layout.swapaxes(self, axis0, axis1)

    def swapdims(self, dim0: int, dim1: int) -> Any:
        return layout.swapdims(self, dim0, dim1)

    def adjoint(self) -> Any:
        return layout.adjoint(self)

    @property
    def mT(self) -> Any:  # noqa: N802 - PyTorch's name
        """A view with the last two dims swapped (each matrix of a batch transposed)."""
        return layout.swap_last_two(self, "mT")

    @property
    def mH(self) -> Any:  # noqa: N802
        """The conjugate transpose of each matrix of a batch: ``mT`` for real tensors."""
        return layout.swap_last_two(self, "mH")

    @property
    def H(self) -> Any:  # noqa: N802
        """The conjugate transpose of a matrix (``t()`` for a real 2-D tensor; a 0-d one as it is).

        Raises:
            ShapeError: neither 0-d nor 2-D.
        """
        if self.ndim not in (0, 2):
            raise ShapeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
        return ops.t(self)

    def narrow(self, dim: int, start: Any, length: int) -> Any:
        return layout.narrow(self, dim, start, length)

    def narrow_copy(self, dim: int, start: Any, length: int) -> Any:
        return layout.narrow_copy(self, dim, start, length)

    def select(self, dim: int, index: Any) -> Any:
        return layout.select(self, dim, index)

    def ravel(self) -> Any:
        return layout.ravel(self)

    def slice_scatter(self, src: Any, dim: int = 0, start: int | None = None, end: int | None = None,
                      step: int = 1) -> Any:
        return view_scatter.slice_scatter(self, src, dim, start, end, step)

    def select_scatter(self, src: Any, dim: int, index: int) -> Any:
        return view_scatter.select_scatter(self, src, dim, index)

    def diagonal_scatter(self, src: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        return view_scatter.diagonal_scatter(self, src, offset, dim1, dim2)

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

    # --- in-place layout changes ----------------------------------------------------------------

    def _relayout_(self, make: Any) -> Any:
        """Take the layout of ``make(self)``, a view of self's memory (and, when the change is
        recorded, its history), in place.

        Raises:
            AutogradError: self is a leaf that requires grad and grad mode is on.
        """
        records = self._records()
        result = make(self)
        self._data = result._data
        if records:
            self.grad_fn, self._output_nr = result.grad_fn, result._output_nr
            self._requires_grad = result._requires_grad
        return self

    def squeeze_(self, dim: Any = None) -> Any:
        """Drop size-1 dims (all, or those of ``dim``), in place."""
        return self._relayout_(lambda x: ops.squeeze(x, dim))

    def unsqueeze_(self, dim: int) -> Any:
        """Insert a dim of size 1 at ``dim``, in place."""
        return self._relayout_(lambda x: ops.unsqueeze(x, dim))

    def t_(self) -> Any:
        """Transpose a matrix, in place."""
        return self._relayout_(ops.t)

    def transpose_(self, dim0: int, dim1: int) -> Any:
        """Swap dims ``dim0`` and ``dim1``, in place."""
        return self._relayout_(lambda x: ops.transpose(x, dim0, dim1))

    swapaxes_ = swapdims_ = transpose_
