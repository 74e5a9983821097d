"""Writes by index along a dimension: scatter_add, scatter_reduce, index_add, index_copy and
index_fill. Each returns a new tensor; the in-place methods
(``scatter_add_``, ...) run these through :mod:`zgrad.tensor_inplace`'s machinery.

Gradients are PyTorch's: a reduction's gradient to ``self`` and ``src`` follows the formula of its
reduction (prod: exact at zeros; amax/amin: split evenly among the elements equal to the result);
with ``include_self=False`` the positions written get no gradient back to ``self``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.autograd.function import Op
from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch, dispatch_index
from zgrad.kernels.dispatch_pointwise import compare
from zgrad.ops._args import index_arg, refuse_dtype, tensor_arg
from zgrad.ops.indexing import masked_fill, scatter, source_gradient
from zgrad.tensor import Tensor
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = ["scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill"]

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce: str, dtype: np.dtype) -> Any:
    """The value a reduction starts from where ``include_self=False`` leaves self out."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if is_floating(dtype):
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:  # bool: False is the least, True the greatest
        return reduce == "amin"
    return int(info.min if reduce == "amax" else info.max)


def _counts(x: Any, dim: int, index: Any, include_self: bool) -> Any:
    """How many values each position of the result combines (at least 1), in x's dtype (``x``
    gives the shape, dtype and device)."""
    counts = dispatch.full(x.shape, 1 if include_self else 0, x.dtype, dispatch.device_type_of(x))
    dispatch_index.scatter_reduce_(counts, dim, index, 1, "sum")
    return dispatch.binary("maximum", counts, 1, dtype=x.dtype)


def _scatter_reduced(x: Any, dim: int, index: Any, src: Any, reduce: str, include_self: bool) -> Any:
    """x with ``src`` combined in at ``index`` along ``dim`` (see :func:`scatter_reduce`)."""
    out = dispatch.cast(x, x.dtype)
    if not include_self:
        dispatch_index.scatter(out, dim, index, _identity(reduce, x.dtype))
    if reduce != "mean":
        return dispatch_index.scatter_reduce_(out, dim, index, src, reduce)
    dispatch_index.scatter_reduce_(out, dim, index, src, "sum")
    counts = _counts(x, dim, index, include_self)
    return dispatch.binary("div" if is_floating(x.dtype) else "floor_divide", out, counts, dtype=x.dtype)


class ScatterReduce(Op):
    """``self`` with ``src`` combined in at ``index`` along ``dim`` by ``reduce``."""

    @staticmethod
    def forward(ctx, x, dim, index, src, reduce, include_self):
        dim = dispatch_index.normalize_dim(dim, x.ndim)
        out = _scatter_reduced(x, dim, index, src, reduce, include_self)
        ctx.dim, ctx.reduce, ctx.include_self, ctx.src_shape = dim, reduce, include_self, src.shape
        # sum and mean need only the index (PyTorch keeps self and src for every reduction)
        ctx.save_for_backward(*((index,) if reduce in ("sum", "mean") else (index, x, src, out)))
        return out

    @staticmethod
    def backward(ctx, grad):
        index, *values = ctx.saved_tensors
        dim, reduce, include_self = ctx.dim, ctx.reduce, ctx.include_self

        def at_index(a):
            return dispatch_index.gather(a, dim, index)

        if reduce == "sum":
            gx, gsrc = grad, at_index(grad)
        elif reduce == "mean":
            gx = dispatch.binary("div", grad, _counts(grad, dim, index, include_self))
            gsrc = at_index(gx)
        else:
            x, src, result = values
            src = src[tuple(slice(0, n) for n in index.shape)]  # the part of src the index reaches
            gx, gsrc = _extremum_or_prod_gradients(grad, x, dim, index, src, result, reduce, include_self)
        if not include_self:
            gx = dispatch_index.scatter(dispatch.cast(gx, gx.dtype), dim, index, 0)
        return gx, None, None, source_gradient(gsrc, index.shape, ctx.src_shape), None, None


def _extremum_or_prod_gradients(grad, x, dim, index, src, result, reduce, include_self):
    """The gradients (to self, to src) of a scatter prod, amax or amin: amax and amin split the
    gradient evenly among the values equal to the result, as PyTorch."""
    if reduce == "prod":
        return _prod_gradients(grad, x, dim, index, src, result, include_self)
    self_is_result = compare("eq", x, result)
    src_is_result = compare("eq", src, dispatch_index.gather(result, dim, index))
    ties = dispatch.cast(self_is_result, grad.dtype)
    dispatch_index.scatter_reduce_(ties, dim, index, src_is_result, "sum")
    share = dispatch.binary("div", grad, ties)
    return (dispatch_index.where(self_is_result, share, 0),
            dispatch_index.where(src_is_result, dispatch_index.gather(share, dim, index), 0))


def _prod_gradients(grad, x, dim, index, src, result, include_self):
    """PyTorch's gradients of a scatter product, exact where ``self`` or a single ``src`` is zero:
    there the product of the other factors stands in for result / value."""
    masked_x = dispatch_index.where(compare("eq", x, 0), 1, x)
    gx = dispatch.binary("div", dispatch.binary("mul", grad, _scatter_reduced(masked_x, dim, index, src, "prod",
                                                                               include_self)), masked_x)
    src_zero = compare("eq", src, 0)
    zeros = dispatch.full(x.shape, 0, grad.dtype, dispatch.device_type_of(x))
    zeros_per_slot = dispatch_index.scatter_reduce_(zeros, dim, index, src_zero, "sum")
    single_zero = compare("logical_and", src_zero, compare("eq", dispatch_index.gather(zeros_per_slot, dim, index), 1))
    others = _scatter_reduced(x, dim, index, dispatch_index.where(single_zero, 1, src), "prod", include_self)
    with_others = dispatch_index.gather(dispatch.binary("mul", grad, others), dim, index)
    by_division = dispatch.binary("div", dispatch_index.gather(dispatch.binary("mul", grad, result), dim, index),
                                  dispatch_index.where(src_zero, 1, src))
    return gx, dispatch_index.where(single_zero, with_others, by_division)


class IndexAdd(Op):
    """``self`` with ``alpha * source``'s slices added at the 1-D ``index`` along ``dim``."""

    @staticmethod
    def forward(ctx, x, dim, index, source, alpha):
        ctx.dim, ctx.index, ctx.alpha = dim, index, alpha
        scaled = source if alpha == 1 else dispatch.binary("mul", source, alpha, dtype=source.dtype)
        return dispatch_index.index_add_(dispatch.cast(x, x.dtype), dim, index, scaled)

    @staticmethod
    def backward(ctx, grad):
        gsource = dispatch_index.index_select(grad, ctx.dim, ctx.index)
        if ctx.alpha != 1:
            gsource = dispatch.binary("mul", gsource, ctx.alpha, dtype=grad.dtype)
        return grad, None, None, gsource, None


# --- public functions -------------------------------------------------------------------------

def _checked_dim(x: Any, dim: int) -> int:
    return dispatch_index.normalize_dim(dim, x.ndim)


def _index_slices(name: str, x: Any, dim: int, index: Any, source: Any | None) -> np.ndarray:
    """The 1-D index of an ``index_*`` op, checked against self (and ``source``'s shape).

    Raises:
        IndexError / ShapeError: an index out of range, or a source of the wrong shape.
    """
    array = index_arg(index, name)
    if array.ndim > 1:
        raise ShapeError(f"{name}(): Index is supposed to be a vector, got shape {list(array.shape)}")
    array = array.reshape(-1)
    dispatch_index.check_index_range(array, dim, x.shape[dim] if x.ndim else 1)
    if source is not None:
        expected = x.shape[:dim] + (array.size,) + x.shape[dim + 1:] if x.ndim else ((array.size,) if source.ndim else ())
        if tuple(source.shape) != tuple(expected) and not (x.ndim == 0 and source.numel() == 1):
            raise ShapeError(f"{name}(): Source/destination tensor must have the same shape apart from dimension "
                             f"{dim}: expected {list(expected)}, got {list(source.shape)}")
    return array


def _same_dtype(name: str, x: Any, source: Any) -> None:
    if source.dtype != x.dtype:
        raise DTypeError(f"{name}(): self ({x.dtype}) and source ({source.dtype}) must have the same scalar type")


@autocast_op()
def scatter_add(input: Any, dim: int, index: Any, src: Any) -> Any:  # noqa: A002
    """A copy of ``input`` with ``src[i][j][k]`` added at ``[i][index[i][j][k]][k]`` (dim=1; likewise
    for any dim); repeated indices add up. Differentiable in ``input`` and ``src``."""
    return scatter_reduce(input, dim, index, src, "sum")


def scatter_reduce(input: Any, dim: int, index: Any, src: Any, reduce: str, *,  # noqa: A002
                   include_self: bool = True) -> Any:
    """A copy of ``input`` whose positions ``index`` names along ``dim`` (as :func:`scatter_add`)
    hold the ``reduce`` ("sum", "prod", "mean", "amax", "amin") of the ``src`` values sent there,
    with the original value included unless ``include_self=False``. An integer mean rounds down.

    Raises:
        ValueError: an unknown ``reduce``. DTypeError: src's dtype differs from input's.
        IndexError / ValueError / TypeError: bad dim, index values, shapes or index dtype.
    """
    if reduce not in REDUCTIONS:
        raise ValueError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    x = tensor_arg(input, "scatter_reduce")
    source = tensor_arg(src, "scatter_reduce", "src")
    _same_dtype("scatter_reduce", x, source)
    if reduce == "mean" and x.dtype == np.bool_:
        raise refuse_dtype("scatter_gather_tensor_cpu_reduce_mean", x.dtype)
    return ScatterReduce.apply(x, dim, index_arg(index, "scatter_reduce"), source, reduce, include_self)


@accepts_out()
def index_add(input: Any, dim: int, index: Any, source: Any, *, alpha: float = 1) -> Any:  # noqa: A002
    """A copy of ``input`` with ``alpha * source``'s slices along ``dim`` added at the positions
    of the 1-D ``index`` (repeated positions add up). Differentiable in ``input`` and ``source``.

    Raises:
        IndexError: an index out of range or a bad ``dim``. ShapeError: a source of the wrong shape.
        DTypeError: source's dtype differs from input's.
    """
    x = tensor_arg(input, "index_add")
    source = tensor_arg(source, "index_add", "source")
    _same_dtype("index_add", x, source)
    dim = _checked_dim(x, dim)
    index = _index_slices("index_add", x, dim, index, source)
    if x.ndim == 0:
        return IndexAdd.apply(x.reshape(1), 0, index, source.reshape(1), alpha).reshape(())
    return IndexAdd.apply(x, dim, index, source, alpha)


@autocast_op()
def index_copy(input: Any, dim: int, index: Any, source: Any) -> Any:  # noqa: A002
    """A copy of ``input`` with ``source``'s slices along ``dim`` written at the positions of the
    1-D ``index``. Differentiable in ``input`` and ``source``.

    Raises:
        IndexError: an index out of range or a bad ``dim``. ShapeError: a source of the wrong shape.
        DTypeError: source's dtype differs from input's.
    """
    x = tensor_arg(input, "index_copy")
    source = tensor_arg(source, "index_copy", "source")
    _same_dtype("index_copy", x, source)
    dim = _checked_dim(x, dim)
    index = _index_slices("index_copy", x, dim, index, source)
    if x.ndim == 0:
        return scatter(x.reshape(1), 0, Tensor(index), source.reshape(1)).reshape(())
    spread = (1,) * dim + (index.size,) + (1,) * (x.ndim - dim - 1)
    positions = dispatch.contiguous(dispatch.broadcast_to(index.reshape(spread), source.shape))
    return scatter(x, dim, Tensor(positions), source)


def index_fill(input: Any, dim: int, index: Any, value: Any) -> Any:  # noqa: A002
    """A copy of ``input`` with ``value`` (a number, or a 0-d tensor, which then gets a gradient)
    in every slice along ``dim`` at the positions of the 1-D ``index``.

    Raises:
        IndexError: an index out of range or a bad ``dim``.
    """
    x = tensor_arg(input, "index_fill")
    dim = _checked_dim(x, dim)
    index = _index_slices("index_fill", x, dim, index, None)
    size = x.shape[dim] if x.ndim else 1
    chosen = dispatch.full((size,), False, np.bool_, x.device.type)
    dispatch_index.scatter(chosen, 0, dispatch.asarray(index, device_type=x.device.type), True)
    mask = chosen.reshape((1,) * dim + (size,) + (1,) * (x.ndim - dim - 1)) if x.ndim else chosen.reshape(())
    return masked_fill(x, Tensor(mask), value)
