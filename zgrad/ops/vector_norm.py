"""Vector norms over any dimensions (``zgrad.linalg.vector_norm``, and through it ``zgrad.norm``,
``Tensor.norm``, ``zgrad.cdist``, ``zgrad.dist``, ``zgrad.renorm`` and the matrix norms), with
PyTorch's gradients: zero where the norm is zero, split evenly among the elements that tie for an
infinity norm.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad.autograd.function import Op
from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_pointwise, dispatch_reduce
from zgrad.ops._args import tensor_arg
from zgrad.tensor import Tensor
from zgrad.ops.elementwise import Cast
from zgrad.ops.functions import add, div, mul, sub
from zgrad.ops.indexing import where
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op

__all__ = ["vector_norm", "dist", "renorm"]


def _extreme_abs(absx, axes, largest: bool):
    """max (``largest``) or min of ``absx`` over ``axes``, keeping them as size 1."""
    if any(absx.shape[d] == 0 for d in axes):
        raise RuntimeError("linalg.vector_norm cannot compute the inf norm on an empty tensor because the operation "
                           "does not have an identity")
    rows = dispatch_reduce.to_rows(absx, axes)
    index = dispatch_reduce.argmax(rows.rows, 1, True, largest)
    kept = tuple(1 if i in axes else n for i, n in enumerate(absx.shape))
    return dispatch_index.gather(rows.rows, 1, index).reshape(kept)


def _where_zero(x, value, otherwise):
    """``value`` where ``x`` is 0, else ``otherwise``."""
    return dispatch_index.where(dispatch_pointwise.compare("eq", x, 0), value, otherwise)


def _over_norm(grad, norm, power):
    """grad / norm**power, 0 where the norm is 0 (PyTorch's masked_fill of a norm's gradient)."""
    safe = _where_zero(norm, 1, norm)
    divisor = safe if power == 1 else dispatch.binary("pow", safe, power)
    return _where_zero(norm, 0, dispatch.binary("div", grad, divisor))


class VectorNorm(Op):
    """The ``order``-norm of a floating array over ``axes`` (sorted, in range)."""

    @staticmethod
    def forward(ctx, x, order, axes, keepdim):
        kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
        shape = kept if keepdim else tuple(n for i, n in enumerate(x.shape) if i not in axes)
        if len(axes) == x.ndim and order != -math.inf:
            norm = dispatch_reduce.vector_norm(x, order).reshape(kept)  # one fused pass
        elif math.isinf(order):
            norm = _extreme_abs(dispatch.unary("abs", x), axes, order > 0)
        elif order == 0:
            norm = dispatch.reduce_sum(dispatch_pointwise.compare("ne", x, 0), axes, True, x.dtype)
        elif order == 1:
            norm = dispatch.reduce_sum(dispatch.unary("abs", x), axes, True)
        elif order == 2:
            norm = dispatch.unary("sqrt", dispatch.reduce_sum(dispatch.binary("mul", x, x), axes, True))
        else:
            powered = dispatch.binary("pow", dispatch.unary("abs", x), order)
            norm = dispatch.binary("pow", dispatch.reduce_sum(powered, axes, True), 1.0 / order)
        ctx.order, ctx.axes = order, axes
        ctx.save_for_backward(x, norm)
        return norm.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        x, norm = ctx.saved_tensors
        p = ctx.order
        grad = grad.reshape(norm.shape)
        if p == 0:
            return dispatch.full(x.shape, 0, x.dtype, dispatch.device_type_of(x)), None, None, None
        sign = dispatch.unary("sign", x)
        if p == 1:
            return dispatch.binary("mul", sign, grad), None, None, None
        if math.isinf(p):
            mask = dispatch.cast(dispatch_pointwise.compare("eq", dispatch.unary("abs", x), norm), x.dtype)
            share = dispatch.binary("div", grad, dispatch.reduce_sum(mask, ctx.axes, True))
            return dispatch.binary("mul", dispatch.binary("mul", sign, mask), share), None, None, None
        if p == 2:
            return dispatch.binary("mul", x, _over_norm(grad, norm, 1)), None, None, None
        absx = dispatch.unary("abs", x)
        if p < 1:  # |x|**(p - 1) is infinite at 0, where PyTorch takes 0
            powered = _where_zero(x, 0, dispatch.binary("pow", _where_zero(x, 1, absx), p - 1))
            scale = dispatch.binary("mul", grad, dispatch.binary("pow", norm, 1 - p))
            return dispatch.binary("mul", dispatch.binary("mul", sign, powered), scale), None, None, None
        scaled = dispatch.binary("mul", sign, dispatch.binary("pow", absx, p - 1)) if p < 2 else \
            dispatch.binary("mul", x, dispatch.binary("pow", absx, p - 2))
        return dispatch.binary("mul", scaled, _over_norm(grad, norm, p - 1)), None, None, None


@autocast_op("linalg_vector_norm")
def vector_norm(x: Any, ord: float = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: Any = None) -> Any:
    """The ``ord``-norm of ``x`` over ``dim`` (an int, a tuple, or None for every element), as
    ``torch.linalg.vector_norm``: ``inf`` the largest |x|, ``-inf`` the smallest, 0 the count of
    non-zeros, else (sum |x|**ord) ** (1 / ord). ``dtype`` casts ``x`` first.

    Raises:
        DTypeError: ``x`` (or ``dtype``) is not floating, with PyTorch's message.
        TypeError: ``ord`` is not a number.
        IndexError: a dimension is out of range.
    """
    x = tensor_arg(x, "linalg.vector_norm")
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not {type(ord).__name__}")
    if dtype is not None:
        x = Cast.apply(x, np.dtype(dtype)) if x.dtype != dtype else x
    if not is_floating(x.dtype):
        raise DTypeError("linalg.vector_norm: Expected a floating point or complex tensor as input. "
                         f"Got {dispatch.scalar_type_name(x.dtype)}")
    axes = dispatch._normalize_axes(dim, x.ndim) if not (isinstance(dim, (tuple, list)) and not dim) else \
        dispatch._normalize_axes(None, x.ndim)
    return VectorNorm.apply(x, float(ord), axes, keepdim)


def dist(input: Any, other: Any, p: float = 2) -> Any:  # noqa: A002
    """The ``p``-norm of ``input - other`` (broadcast) over every element, a 0-d tensor.

    Raises:
        DTypeError: a non-floating difference (PyTorch's message).
    """
    difference = sub(tensor_arg(input, "dist"), other)
    if not is_floating(difference.dtype):
        raise DTypeError("norm(): input dtype should be either floating point or complex. "
                         f"Got {dispatch.scalar_type_name(difference.dtype)} instead.")
    return vector_norm(difference, p)


def renorm(input: Any, p: float, dim: int, maxnorm: float) -> Any:  # noqa: A002
    """``input`` with each slice along ``dim`` whose ``p``-norm exceeds ``maxnorm`` scaled down
    to norm ``maxnorm`` (PyTorch's factor ``maxnorm / (norm + 1e-7)``); differentiable, the norm
    included.

    Raises:
        RuntimeError: ``p`` <= 0 or ``maxnorm`` < 0 (PyTorch's messages).
        DTypeError: a non-floating ``input``. IndexError: ``dim`` out of range.
    """
    x = tensor_arg(input, "renorm")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    dim = dispatch_index.normalize_dim(dim, x.ndim)
    norms = vector_norm(x, p, tuple(d for d in range(x.ndim) if d != dim), keepdim=True)
    large = Tensor(dispatch_pointwise.compare("gt", norms._data, maxnorm))
    return mul(x, where(large, div(maxnorm, add(norms, 1e-7)), 1.0))
