"""The indexing, sorting and counting methods of :class:`zgrad.Tensor`: ``sort``, ``topk``,
``take``, ``nonzero``, ``index_add`` / ``index_add_``, ``scatter_reduce`` / ``scatter_reduce_``,
``index_reduce``, ``put``, ``fill_diagonal_``, ``unique``, ``bincount``, ...

Each out-of-place method is the ``zgrad.ops`` function of the same name applied to the tensor.
Each in-place method goes through :class:`~zgrad.tensor_inplace.TensorInplace`'s ``_inplace``
machinery (PyTorch's rules on leaves, views and versions): it computes the out-of-place result and
writes it into the tensor's memory, recorded in the graph when gradients flow. Bound onto
``Tensor`` by :func:`~zgrad.tensor.tensor_methods` when ``zgrad/__init__.py`` imports this module.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

import numpy as np

from zgrad import ops
from zgrad.kernels import dispatch, dispatch_pointwise
from zgrad.tensor import Tensor, tensor_methods

__all__ = ["TensorIndexing"]


@tensor_methods
class TensorIndexing:
    """The indexing, sorting and counting methods of :class:`zgrad.Tensor` (bound onto it;
    never instantiated)."""

    # --- selection ------------------------------------------------------------------------------

    def take(self, index: Any) -> Any:
        return ops.take(self, index)

    def take_along_dim(self, indices: Any, dim: int | None = None) -> Any:
        return ops.take_along_dim(self, indices, dim)

    def masked_select(self, mask: Any) -> Any:
        return ops.masked_select(self, mask)

    def masked_scatter(self, mask: Any, source: Any) -> Any:
        return ops.masked_scatter(self, mask, source)

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        return ops.nonzero(self, as_tuple=as_tuple)

    def argwhere(self) -> Any:
        return ops.argwhere(self)

    # --- writes by index ------------------------------------------------------------------------

    def index_add(self, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Any:
        return ops.index_add(self, dim, index, source, alpha=alpha)

    def index_copy(self, dim: int, index: Any, source: Any) -> Any:
        return ops.index_copy(self, dim, index, source)

    def index_fill(self, dim: int, index: Any, value: Any) -> Any:
        return ops.index_fill(self, dim, index, value)

    def index_put(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        return ops.index_put(self, indices, values, accumulate)

    def scatter_add(self, dim: int, index: Any, src: Any) -> Any:
        return ops.scatter_add(self, dim, index, src)

    def scatter_reduce(self, dim: int, index: Any, src: Any, reduce: str, *, include_self: bool = True) -> Any:
        return ops.scatter_reduce(self, dim, index, src, reduce, include_self=include_self)

    def _rewrite(self, op: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Self replaced by ``op(self, *args, **kwargs)`` (same shape and dtype), in place: the
        in-place form of an out-of-place op, recorded when the tensors involved need gradients."""
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
        return self._inplace(lambda: dispatch_pointwise.write(self._data, op(Tensor(self._data), *args, **kwargs)._data),
                             lambda old: op(old, *args, **kwargs), *tensors)

    def index_add_(self, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Any:
        """Add ``alpha * source``'s slices along ``dim`` at the positions of ``index``, in place."""
        return self._rewrite(ops.index_add, dim, index, source, alpha=alpha)

    def index_copy_(self, dim: int, index: Any, source: Any) -> Any:
        """Write ``source``'s slices along ``dim`` at the positions of ``index``, in place."""
        return self._rewrite(ops.index_copy, dim, index, source)

    def index_fill_(self, dim: int, index: Any, value: Any) -> Any:
        """Fill the slices along ``dim`` at the positions of ``index`` with ``value``, in place."""
        return self._rewrite(ops.index_fill, dim, index, value)

    def index_put_(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        """``self[indices] = values`` (``accumulate``: ``+=``, repeated positions adding up), in place."""
        return self._rewrite(ops.index_put, indices, values, accumulate)

    def scatter_add_(self, dim: int, index: Any, src: Any) -> Any:
        """Add ``src`` at the positions ``index`` names along ``dim``, in place."""
        return self._rewrite(ops.scatter_add, dim, index, src)

    def scatter_reduce_(self, dim: int, index: Any, src: Any, reduce: str, *, include_self: bool = True) -> Any:
        """Combine ``src`` by ``reduce`` at the positions ``index`` names along ``dim``, in place."""
        return self._rewrite(ops.scatter_reduce, dim, index, src, reduce, include_self=include_self)

    def index_reduce(self, dim: int, index: Any, source: Any, reduce: str, *, include_self: bool = True) -> Any:
        return ops.index_reduce(self, dim, index, source, reduce, include_self=include_self)

    def index_reduce_(self, dim: int, index: Any, source: Any, reduce: str, *, include_self: bool = True) -> Any:
        """Combine ``source``'s slices by ``reduce`` into the slices ``index`` names along ``dim``, in place."""
        return self._rewrite(ops.index_reduce, dim, index, source, reduce, include_self=include_self)

    def put(self, index: Any, source: Any, accumulate: bool = False) -> Any:
        return ops.put(self, index, source, accumulate)

    def put_(self, index: Any, source: Any, accumulate: bool = False) -> Any:
        """Write (``accumulate``: add) ``source`` at the flat positions ``index`` names, in place."""
        return self._rewrite(ops.put, index, source, accumulate)

    def fill_diagonal_(self, fill_value: Any, wrap: bool = False) -> Any:
        """Set the main diagonal (every index equal) to ``fill_value``, in place; a matrix taller
        than wide with ``wrap`` starts the diagonal again every ``columns + 1`` rows (numpy's rule).

        Raises:
            RuntimeError: fewer than two dimensions, or more than two of unequal sizes (PyTorch's messages).
        """
        if self.ndim < 2:
            raise RuntimeError("dimensions must larger than 1")
        if self.ndim > 2 and len(set(self.shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")
        rows, columns = self.shape[0], self.shape[1]
        if self.ndim == 2 and wrap and rows > columns + 1:
            flat = np.arange(0, rows * columns, columns + 1)
            positions = (flat // columns, flat % columns)
        else:
            diagonal = np.arange(min(self.shape))
            positions = (diagonal,) * self.ndim
        key = tuple(Tensor(dispatch.asarray(p, np.int64, self.device.type)) for p in positions)
        return self._rewrite(ops.index_put, key, fill_value)

    def masked_scatter_(self, mask: Any, source: Any) -> Any:
        """Write ``source``'s leading elements where ``mask`` is True, in place."""
        return self._rewrite(ops.masked_scatter, mask, source)

    # --- sorting and counting -------------------------------------------------------------------

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        return ops.sort(self, dim, descending, stable)

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        return ops.argsort(self, dim, descending, stable)

    def msort(self) -> Any:
        return ops.msort(self)

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
        return ops.topk(self, k, dim, largest, sorted)

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> Any:
        return ops.kthvalue(self, k, dim, keepdim)

    def unique(self, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
               dim: int | None = None) -> Any:
        return ops.unique(self, sorted, return_inverse, return_counts, dim)

    def unique_consecutive(self, return_inverse: bool = False, return_counts: bool = False,
                           dim: int | None = None) -> Any:
        return ops.unique_consecutive(self, return_inverse, return_counts, dim)

    def bincount(self, weights: Any = None, minlength: int = 0) -> Any:
        return ops.bincount(self, weights, minlength)

    def histc(self, bins: int = 100, min: float = 0, max: float = 0) -> Any:  # noqa: A002
        return ops.histc(self, bins, min, max)
