"""The reduction methods of :class:`zgrad.Tensor` beyond the everyday ones of
:mod:`zgrad.tensor_math` (sum, mean, max, ...): truth reductions, closeness tests, order
statistics, running reductions (cumsum_ and cumprod_ in place too), amax/amin, nanmean, diff, cov, corrcoef
and sum_to_size.

Each method is the ``zgrad.ops`` function of the same name applied to the tensor, bound onto
``Tensor`` when this module is imported (``zgrad/__init__.py`` imports it first).
"""

from __future__ import annotations

from typing import Any

from zgrad import ops
from zgrad.errors import ShapeError
from zgrad.kernels import dispatch_pointwise, dispatch_reduce, dispatch_scan
from zgrad.ops._args import require_kinds
from zgrad.tensor import tensor_methods

__all__ = ["TensorReduce"]


@tensor_methods
class TensorReduce:
    """The reduction methods of :class:`zgrad.Tensor` (bound onto it; never instantiated)."""

    def all(self, dim: Any = None, keepdim: bool = False) -> Any:
        return ops.all(self, dim, keepdim)

    def any(self, dim: Any = None, keepdim: bool = False) -> Any:
        return ops.any(self, dim, keepdim)

    def count_nonzero(self, dim: Any = None) -> Any:
        return ops.count_nonzero(self, dim)

    def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
        return ops.isclose(self, other, rtol, atol, equal_nan)

    def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
        return ops.allclose(self, other, rtol, atol, equal_nan)

    def equal(self, other: Any) -> bool:
        return ops.equal(self, other)

    def amax(self, dim: Any = (), keepdim: bool = False) -> Any:
        return ops.amax(self, dim, keepdim)

    def amin(self, dim: Any = (), keepdim: bool = False) -> Any:
        return ops.amin(self, dim, keepdim)

    def aminmax(self, *, dim: int | None = None, keepdim: bool = False) -> Any:
        return ops.aminmax(self, dim=dim, keepdim=keepdim)

    def nanmean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return ops.nanmean(self, dim, keepdim, dtype=dtype)

    def median(self, dim: int | None = None, keepdim: bool = False) -> Any:
        return ops.median(self, dim, keepdim)

    def nanmedian(self, dim: int | None = None, keepdim: bool = False) -> Any:
        return ops.nanmedian(self, dim, keepdim)

    def quantile(self, q: Any, dim: int | None = None, keepdim: bool = False, *,
                 interpolation: str = "linear") -> Any:
        return ops.quantile(self, q, dim, keepdim, interpolation=interpolation)

    def nanquantile(self, q: Any, dim: int | None = None, keepdim: bool = False, *,
                    interpolation: str = "linear") -> Any:
        return ops.nanquantile(self, q, dim, keepdim, interpolation=interpolation)

    def mode(self, dim: int = -1, keepdim: bool = False) -> Any:
        return ops.mode(self, dim, keepdim)

    def cumprod(self, dim: int, *, dtype: Any = None) -> Any:
        return ops.cumprod(self, dim, dtype=dtype)

    def cumsum_(self, dim: int, *, dtype: Any = None) -> Any:
        """The running sums along ``dim`` in place (in self's dtype); differentiable. A bool tensor
        is refused, as PyTorch refuses it."""
        require_kinds(self, "cumsum_out_cpu", "iuf")
        return self._inplace(
            lambda: dispatch_pointwise.write(self._data, dispatch_reduce.cumsum(self._data, dim, dtype=dtype)),
            lambda old: ops.cumsum(old, dim, dtype=dtype).to(self.dtype))

    def cumprod_(self, dim: int, *, dtype: Any = None) -> Any:
        """The running products along ``dim`` in place (in self's dtype); differentiable; a bool
        tensor is refused, as :meth:`cumsum_`."""
        require_kinds(self, "cumprod_out_cpu", "iuf")
        return self._inplace(
            lambda: dispatch_pointwise.write(self._data, dispatch_scan.cumprod(self._data, dim, dtype)),
            lambda old: ops.cumprod(old, dim, dtype=dtype).to(self.dtype))

    def cummax(self, dim: int) -> Any:
        return ops.cummax(self, dim)

    def cummin(self, dim: int) -> Any:
        return ops.cummin(self, dim)

    def diff(self, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
        return ops.diff(self, n, dim, prepend, append)

    def cov(self, *, correction: int = 1, fweights: Any = None, aweights: Any = None) -> Any:
        return ops.cov(self, correction=correction, fweights=fweights, aweights=aweights)

    def corrcoef(self) -> Any:
        return ops.corrcoef(self)

    def sum_to_size(self, *size: Any) -> Any:
        """The sum of this tensor down to ``size``, a shape it broadcasts from (the gradient of an
        expand): leading dimensions and those where ``size`` has 1 are summed; self if ``size`` is
        its shape.

        Raises:
            ShapeError: ``size`` does not broadcast to this tensor's shape (PyTorch's message).
        """
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
        lead = self.ndim - len(shape)
        if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, self.shape[lead:])):
            raise ShapeError(f"size {{{list(shape)}}} is not expandable to size {{{list(self.shape)}}}.")
        if shape == self.shape:
            return self
        dims = (*range(lead), *(lead + i for i, n in enumerate(shape) if n == 1 and self.shape[lead + i] != 1))
        return ops.sum(self, dims, keepdim=True).reshape(shape)

    def logcumsumexp(self, dim: int) -> Any:
        return ops.logcumsumexp(self, dim)
