"""The math, comparison and layout methods and operators of :class:`zgrad.Tensor`.

Each one is the ``zgrad.ops`` function of the same name applied to the tensor, so a method and
its function can never disagree. ``zgrad.ops`` is looked up at call time: its modules need
``Tensor`` defined first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import zgrad

__all__ = ["TensorMath"]


def _dims(dims: tuple[Any, ...]) -> Any:
    """``f(1, 2)`` and ``f((1, 2))`` alike, as PyTorch's varargs size methods accept both."""
    return tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims


def _bool_operand(operator: str, x: Any) -> Any:
    """``x`` if it is a bool tensor or a bool: ``& | ^ ~`` are logical on those, as in PyTorch.

    Raises:
        TypeError: another dtype (PyTorch's bitwise integer forms are not implemented).
    """
    if isinstance(x, bool) or getattr(x, "dtype", None) == np.bool_:
        return x
    raise TypeError(f"operator {operator} is supported on bool tensors only (bitwise integer operators are not "
                    f"implemented); got {getattr(x, 'dtype', type(x).__name__)}")


class TensorMath:
    """Mixin of :class:`zgrad.Tensor`: operators and out-of-place methods."""

    __slots__ = ()

    # --- arithmetic operators -------------------------------------------------------------------

    def __add__(self, other: Any) -> Any:
        return zgrad.ops.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return zgrad.ops.add(other, self)

    def __sub__(self, other: Any) -> Any:
        return zgrad.ops.sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return zgrad.ops.sub(other, self)

    def __mul__(self, other: Any) -> Any:
        return zgrad.ops.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return zgrad.ops.mul(other, self)

    def __truediv__(self, other: Any) -> Any:
        return zgrad.ops.div(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return zgrad.ops.div(other, self)

    def __mod__(self, other: Any) -> Any:
        return zgrad.ops.remainder(self, other)

    def __rmod__(self, other: Any) -> Any:
        return zgrad.ops.remainder(other, self)

    def __matmul__(self, other: Any) -> Any:
        return zgrad.ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return zgrad.ops.matmul(other, self)

    def __pow__(self, other: Any) -> Any:
        return zgrad.ops.pow(self, other)

    def __rpow__(self, other: Any) -> Any:
        return zgrad.ops.pow(other, self)

    def __neg__(self) -> Any:
        return zgrad.ops.neg(self)

    def __abs__(self) -> Any:
        return zgrad.ops.abs(self)

    def __getitem__(self, index: Any) -> Any:
        return zgrad.ops.getitem(self, index)

    # --- comparisons (bool results, no gradient) ------------------------------------------------

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return zgrad.ops.eq(self, other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return zgrad.ops.ne(self, other)

    def __lt__(self, other: Any) -> Any:
        return zgrad.ops.lt(self, other)

    def __le__(self, other: Any) -> Any:
        return zgrad.ops.le(self, other)

    def __gt__(self, other: Any) -> Any:
        return zgrad.ops.gt(self, other)

    def __ge__(self, other: Any) -> Any:
        return zgrad.ops.ge(self, other)

    def __invert__(self) -> Any:
        return zgrad.ops.logical_not(_bool_operand("~", self))

    def __and__(self, other: Any) -> Any:
        return zgrad.ops.logical_and(_bool_operand("&", self), _bool_operand("&", other))

    def __or__(self, other: Any) -> Any:
        return zgrad.ops.logical_or(_bool_operand("|", self), _bool_operand("|", other))

    def __xor__(self, other: Any) -> Any:
        return zgrad.ops.logical_xor(_bool_operand("^", self), _bool_operand("^", other))

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def eq(self, other: Any) -> Any:
        return zgrad.ops.eq(self, other)

    def ne(self, other: Any) -> Any:
        return zgrad.ops.ne(self, other)

    def lt(self, other: Any) -> Any:
        return zgrad.ops.lt(self, other)

    def le(self, other: Any) -> Any:
        return zgrad.ops.le(self, other)

    def gt(self, other: Any) -> Any:
        return zgrad.ops.gt(self, other)

    def ge(self, other: Any) -> Any:
        return zgrad.ops.ge(self, other)

    def logical_not(self) -> Any:
        return zgrad.ops.logical_not(self)

    # --- element-wise math ----------------------------------------------------------------------

    def add(self, other: Any, alpha: float = 1) -> Any:
        return zgrad.ops.add(self, other if alpha == 1 else zgrad.ops.mul(other, alpha))

    def sub(self, other: Any, alpha: float = 1) -> Any:
        return zgrad.ops.sub(self, other if alpha == 1 else zgrad.ops.mul(other, alpha))

    def mul(self, other: Any) -> Any:
        return zgrad.ops.mul(self, other)

    def div(self, other: Any) -> Any:
        return zgrad.ops.div(self, other)

    def pow(self, exponent: Any) -> Any:
        return zgrad.ops.pow(self, exponent)

    def square(self) -> Any:
        return zgrad.ops.square(self)

    def remainder(self, other: Any) -> Any:
        return zgrad.ops.remainder(self, other)

    def matmul(self, other: Any) -> Any:
        return zgrad.ops.matmul(self, other)

    def neg(self) -> Any:
        return zgrad.ops.neg(self)

    def exp(self) -> Any:
        return zgrad.ops.exp(self)

    def log(self) -> Any:
        return zgrad.ops.log(self)

    def tanh(self) -> Any:
        return zgrad.ops.tanh(self)

    def sigmoid(self) -> Any:
        return zgrad.ops.sigmoid(self)

    def relu(self) -> Any:
        return zgrad.ops.relu(self)

    def abs(self) -> Any:
        return zgrad.ops.abs(self)

    def sqrt(self) -> Any:
        return zgrad.ops.sqrt(self)

    def clamp(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002 - torch's argument names
        return zgrad.ops.clamp(self, min, max)

    clip = clamp

    def maximum(self, other: Any) -> Any:
        return zgrad.ops.maximum(self, other)

    def minimum(self, other: Any) -> Any:
        return zgrad.ops.minimum(self, other)

    def where(self, condition: Any, other: Any) -> Any:
        return zgrad.ops.where(condition, self, other)

    def masked_fill(self, mask: Any, value: Any) -> Any:
        return zgrad.ops.masked_fill(self, mask, value)

    def softmax(self, dim: int = -1) -> Any:
        return zgrad.ops.softmax(self, dim)

    def log_softmax(self, dim: int = -1) -> Any:
        return zgrad.ops.log_softmax(self, dim)

    # --- reductions -----------------------------------------------------------------------------

    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return zgrad.ops.sum(self, dim, keepdim, dtype=dtype)

    def mean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return zgrad.ops.mean(self, dim, keepdim, dtype=dtype)

    def prod(self, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return zgrad.ops.prod(self, dim, keepdim, dtype=dtype)

    def nansum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return zgrad.ops.nansum(self, dim, keepdim, dtype=dtype)

    def cumsum(self, dim: int, *, dtype: Any = None) -> Any:
        return zgrad.ops.cumsum(self, dim, dtype=dtype)

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        return zgrad.ops.max(self, dim, keepdim)

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        return zgrad.ops.min(self, dim, keepdim)

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Any:
        return zgrad.ops.argmax(self, dim, keepdim)

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Any:
        return zgrad.ops.argmin(self, dim, keepdim)

    def var(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Any:
        return zgrad.ops.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
            correction: float | None = None) -> Any:
        return zgrad.ops.std(self, dim, unbiased, keepdim, correction=correction)

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Any:
        return zgrad.ops.logsumexp(self, dim, keepdim)

    # --- layout ---------------------------------------------------------------------------------

    def reshape(self, *shape: Any) -> Any:
        return zgrad.ops.reshape(self, _dims(shape))

    def view(self, *shape: Any) -> Any:
        return zgrad.ops.shape.view(self, _dims(shape))

    def view_as(self, other: Any) -> Any:
        return zgrad.ops.shape.view(self, other.shape)

    def reshape_as(self, other: Any) -> Any:
        return zgrad.ops.reshape(self, other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        return zgrad.ops.flatten(self, start_dim, end_dim)

    def unsqueeze(self, dim: int) -> Any:
        return zgrad.ops.unsqueeze(self, dim)

    def squeeze(self, dim: Any = None) -> Any:
        return zgrad.ops.squeeze(self, dim)

    def expand(self, *sizes: Any) -> Any:
        return zgrad.ops.expand(self, _dims(sizes))

    def expand_as(self, other: Any) -> Any:
        return zgrad.ops.expand(self, other.shape)

    def split(self, split_size_or_sections: Any, dim: int = 0) -> Any:
        return zgrad.ops.split(self, split_size_or_sections, dim)

    def chunk(self, chunks: int, dim: int = 0) -> Any:
        return zgrad.ops.chunk(self, chunks, dim)

    def transpose(self, dim0: int, dim1: int) -> Any:
        return zgrad.ops.transpose(self, dim0, dim1)

    def permute(self, *dims: Any) -> Any:
        return zgrad.ops.permute(self, _dims(dims))

    def t(self) -> Any:
        return zgrad.ops.t(self)

    @property
    def T(self) -> Any:
        return zgrad.ops.permute(self, tuple(reversed(range(self.ndim))))

    def gather(self, dim: int, index: Any) -> Any:
        return zgrad.ops.gather(self, dim, index)

    def index_select(self, dim: int, index: Any) -> Any:
        return zgrad.ops.index_select(self, dim, index)

    def scatter(self, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:
        return zgrad.ops.scatter(self, dim, index, src, value=value)
