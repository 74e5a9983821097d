"""Reductions: sum, mean, prod, nansum, cumsum, max/min (with indices), argmax/argmin, var/std,
logsumexp.

Sums, products and cumulative sums of bool and integer tensors are int64, as PyTorch's (the
rule is :func:`zgrad.kernels.dispatch.sum_dtype`); a ``dtype=`` argument casts the input first.
"""

from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.errors import DTypeError
from zgrad.kernels import dispatch
from zgrad.kernels import dispatch_index
from zgrad.kernels import dispatch_pointwise
from zgrad.kernels import dispatch_reduce
from zgrad.ops._args import tensor_arg
from zgrad.ops.backward_ops import detached, linear_in_grad
from zgrad.ops.elementwise import Cast, formula_mul, maximum, minimum
from zgrad.ops.indexing import Where
from zgrad.ops.shape import Cat, Expand
from zgrad.tensor import Tensor
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = [
    "sum", "mean", "prod", "nansum", "cumsum", "ValuesIndices", "max", "min", "argmax", "argmin", "var", "std",
    "logsumexp",
]


def _expand_reduced(grad, shape, axes, keepdim):
    """Broadcast a reduced gradient back to ``shape`` (a read-only view, no copy; recorded when
    ``grad`` is a tensor)."""
    if not keepdim:
        grad = grad.reshape(tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return Expand.apply(grad, shape) if isinstance(grad, Tensor) else dispatch.broadcast_to(grad, shape)


def formula_sum(x: Any, axes: tuple[int, ...], keepdim: bool = False) -> Any:
    """``x`` summed over ``axes`` in a backward formula (recorded when ``x`` is a tensor)."""
    return Sum.apply(x, axes, keepdim, None) if isinstance(x, Tensor) else dispatch.reduce_sum(x, axes, keepdim)


def _axes(dim, ndim):
    return dispatch._normalize_axes(dim, ndim)


def _all_if_empty(dim: Any) -> Any:
    """``dim`` with PyTorch's "no dimensions means all of them" (``dim=()`` or ``[]``) made None."""
    return None if dim is None or (isinstance(dim, (tuple, list)) and not dim) else dim


class Sum(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, keepdim, dtype):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, _axes(dim, x.ndim), keepdim
        return dispatch.reduce_sum(x, ctx.axes, keepdim, dtype)

    @staticmethod
    def backward(ctx, grad):
        return _expand_reduced(grad, ctx.shape, ctx.axes, ctx.keepdim), None, None, None


class Mean(Op):
    """The mean of a floating array over ``dim``."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        ctx.shape, ctx.axes, ctx.keepdim = x.shape, _axes(dim, x.ndim), keepdim
        count = math.prod(x.shape[a] for a in ctx.axes)
        ctx.scale = 1.0 / count if count else math.nan  # the mean of nothing is NaN, as PyTorch's
        return dispatch.scale_inplace(dispatch.reduce_sum(x, ctx.axes, keepdim), ctx.scale)

    @staticmethod
    def backward(ctx, grad):
        return _expand_reduced(formula_mul(grad, ctx.scale), ctx.shape, ctx.axes, ctx.keepdim), None, None


class Prod(Op):
    """The product over ``dim``; each element's gradient is the product of the others along it,
    computed without a division so that it is right where there are zeros."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, keepdim, dtype):
        ctx.dim, ctx.keepdim = dim, keepdim
        ctx.save_for_backward(x)
        return dispatch.reduce_axes("prod", x, dim, keepdim, dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if on_graph(grad):
            return Prod.formula(ctx, grad, ctx.as_input(0, detached(x))), None, None, None
        return dispatch_reduce.prod_backward(x, grad, ctx.dim), None, None, None

    @staticmethod
    def formula(ctx, grad, x):
        """The gradient recorded (create_graph): grad times the products of the elements before and
        after each one along dim, two running products (twice differentiable, zeros included)."""
        grad = _expand_reduced(grad, x.shape, _axes(ctx.dim, x.ndim), ctx.keepdim)
        if x.ndim == 0:
            return grad
        line = x.reshape(-1) if ctx.dim is None else x
        dim = 0 if ctx.dim is None else ctx.dim % x.ndim
        size = line.shape[dim]
        if size == 0:
            return grad
        ones = dispatch.full((*line.shape[:dim], 1, *line.shape[dim + 1:]), 1, x.dtype, dispatch.device_type_of(x._data))

        def part(start):
            return line[(slice(None),) * dim + (slice(start, start + size - 1),)]

        before = Cat.apply(dim, ones, part(0)).cumprod(dim)
        after = Cat.apply(dim, ones, part(1).flip(dim)).cumprod(dim).flip(dim)
        return formula_mul(grad, (before * after).reshape(x.shape))


class NanSum(Op):
    """The sum of the elements that are not NaN; the gradient is 0 at the NaNs."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, dtype):
        ctx.axes, ctx.keepdim = _axes(dim, x.ndim), keepdim
        ctx.save_for_backward(x)
        return dispatch.reduce_axes("nansum", x, ctx.axes, keepdim, dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        is_nan = dispatch_pointwise.compare("ne", x, x)
        return dispatch_index.where(is_nan, 0, _expand_reduced(grad, x.shape, ctx.axes, ctx.keepdim)), None, None, None


class CumSum(Op):
    """Running sums along ``dim``; the gradient is the running sum of the gradient from the end
    (a map linear in it, whose adjoint is the running sum itself)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, dtype):
        ctx.dim = dim
        return dispatch_reduce.cumsum(x, dim, dtype=dtype)

    @staticmethod
    def backward(ctx, grad):
        return linear_in_grad(grad, lambda g: dispatch_reduce.cumsum(g, ctx.dim, reverse=True),
                              lambda g: dispatch_reduce.cumsum(g, ctx.dim)), None, None


class ValuesIndices(NamedTuple):
    """What ``max(dim)`` and ``min(dim)`` return: the extreme values and their int64 indices."""

    values: Any
    indices: Any


class ExtremumAlongDim(Op):
    """max or min along ``dim`` with the index of the first extreme (a NaN's, if any); the gradient
    goes to that position only."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, largest):
        indices = dispatch_reduce.argmax(x, dim, True, largest, "max" if largest else "min")
        values = dispatch_index.gather(x, dim, indices)
        ctx.save_for_backward(indices)
        ctx.shape, ctx.dim, ctx.keepdim = x.shape, dispatch_index.normalize_dim(dim, x.ndim), keepdim
        if not keepdim:
            values, indices = values.squeeze(ctx.dim), indices.squeeze(ctx.dim)
        return values, indices

    @staticmethod
    def backward(ctx, grad, _grad_indices):
        (indices,) = ctx.saved_tensors
        if not ctx.keepdim:
            grad = grad.reshape(indices.shape)
        return dispatch_index.scatter_add(ctx.shape, grad.dtype, ctx.dim, indices, grad), None, None, None


class ExtremumAll(Op):
    """max or min of all elements; the gradient is split evenly among the elements that tie."""

    @staticmethod
    def forward(ctx, x, largest):
        if x.size == 0:
            raise RuntimeError(f"{'max' if largest else 'min'}(): Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
        rows = dispatch_reduce.to_rows(x, None, floating=False).rows
        value = dispatch_reduce.extreme_rows(rows, largest).reshape(())
        ctx.save_for_backward(x, value)
        return value

    @staticmethod
    def backward(ctx, grad):
        x, value = ctx.saved_tensors
        return dispatch_reduce.distribute_equal(x, value.item(), grad.item()), None


class Var(Op):
    """sum((x - mean)^2) / max(N - correction, 0) over ``dim``; ``std`` takes its square root."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, correction, keepdim, take_sqrt):
        result, rows, mean = dispatch_reduce.var(x, dim, correction, keepdim)
        ctx.denominator = builtins.max(rows.rows.shape[1] - correction, 0)
        ctx.take_sqrt = take_sqrt
        if take_sqrt:
            result = dispatch.unary("sqrt", result)
        ctx.save_for_backward(rows, mean, result)
        return result

    @staticmethod
    def backward(ctx, grad):
        rows, mean, result = ctx.saved_tensors
        if isinstance(grad, Tensor):
            return Var.formula(ctx, grad, rows, result), None, None, None, None
        if ctx.take_sqrt:
            # d std = d var / (2 std); PyTorch gives 0 where std is 0 rather than 0/0: dividing by
            # inf there gives that 0 without a division by zero
            scale = dispatch_index.where(dispatch_pointwise.compare("eq", result, 0), math.inf,
                                         dispatch.binary("mul", result, ctx.denominator))
            coef = dispatch.binary("div", grad, scale)
        else:
            coef = dispatch.binary("mul", grad, 2.0 / ctx.denominator if ctx.denominator else math.inf)
        return dispatch_reduce.var_backward(rows, mean, coef), None, None, None, None

    @staticmethod
    def formula(ctx, grad, rows, result):
        """grad * 2 (x - mean) / N' (var), or grad (x - mean) / (N' std) (0 where std is 0),
        recorded, with the mean recomputed from x on the graph."""
        x, kept = _reduced_on_graph(ctx, rows, grad)
        centered = x - x.mean(dim=rows.axes, keepdim=True)
        if not ctx.take_sqrt:
            return centered * (kept * (2.0 / ctx.denominator if ctx.denominator else math.inf))
        std = ctx.as_output(0, detached(result)).reshape(kept.shape)
        scale = Where.apply(dispatch_pointwise.compare("eq", detached(std), 0), math.inf, std * ctx.denominator)
        return centered * (kept / scale)


def _reduced_on_graph(ctx, rows, grad):
    """(the input of a reduction over ``rows.axes`` as a tensor on the graph, from its saved rows;
    ``grad`` with the reduced dimensions kept, to broadcast against it)."""
    x = ctx.as_input(0, dispatch_reduce.from_rows(rows, rows.rows))
    return x, grad.reshape(tuple(1 if i in rows.axes else n for i, n in enumerate(x.shape)))


class LogSumExp(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        result, rows = dispatch_reduce.logsumexp(x, dim, keepdim)
        ctx.save_for_backward(rows, result)
        return result

    @staticmethod
    def backward(ctx, grad):
        rows, result = ctx.saved_tensors
        if isinstance(grad, Tensor):  # grad * exp(x - result), recorded
            x, kept = _reduced_on_graph(ctx, rows, grad)
            return kept * (x - ctx.as_output(0, detached(result)).reshape(kept.shape)).exp(), None, None
        return dispatch_reduce.logsumexp_backward(grad, rows, result), None, None


# --- public functions -------------------------------------------------------------------------

def _cast(input: Any, dtype: Any, name: str) -> Any:  # noqa: A002
    """``input`` cast to ``dtype`` (differentiably; itself when it has that dtype or ``dtype`` is None)."""
    x = tensor_arg(input, name)
    return x if dtype is None or x.dtype == dtype else Cast.apply(x, np.dtype(dtype))


@accepts_out("as_dtype")
@autocast_op()
def sum(input: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:  # noqa: A001,A002
    """The sum over ``dim`` (an int, a tuple, or None or an empty tuple for all).

    Bool and integer tensors sum in int64, as PyTorch's, so ``(pred == y).sum()`` counts without
    wrapping; floating ones keep their dtype. ``dtype`` casts the input before the sum and is the
    result's dtype.
    """
    return Sum.apply(_cast(input, dtype, "sum"), _all_if_empty(dim), keepdim, dtype)


@accepts_out()
def mean(input: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:  # noqa: A002
    """The mean over ``dim`` (an int, a tuple, or None for all) of a floating tensor; ``dtype``
    (a floating one) casts the input first, and makes the mean of an integer tensor possible.

    Raises:
        RuntimeError: the input (without ``dtype``) or ``dtype`` is not floating, with PyTorch's
            message ("mean(): could not infer output dtype ...").
    """
    x = tensor_arg(input, "mean")
    return Mean.apply(_cast(x, dispatch.mean_dtype(x.dtype, dtype), "mean"), _all_if_empty(dim), keepdim)


@accepts_out("as_dtype")
@autocast_op()
def prod(input: Any, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None) -> Any:  # noqa: A002
    """The product of all elements, or along the one dimension ``dim``.

    Bool and integer tensors multiply in int64, as PyTorch's; ``dtype`` casts the input first
    and is the result's dtype. The gradient is right where the input holds zeros (one or more).

    Raises:
        TypeError: ``dim`` is not an int (PyTorch's prod takes one dimension, not a tuple).
    """
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
        raise TypeError(f"prod(): dim must be one int (or None for all elements), got {type(dim).__name__}")
    return Prod.apply(_cast(input, dtype, "prod"), dim, keepdim, dtype)


@accepts_out("as_dtype")
def nansum(input: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:  # noqa: A002
    """The sum over ``dim`` (an int, a tuple, or None for all) treating NaNs as zero; their
    gradient is zero. Dtypes as :func:`sum`."""
    return NanSum.apply(_cast(input, dtype, "nansum"), _all_if_empty(dim), keepdim, dtype)


@accepts_out("as_dtype")
@autocast_op()
def cumsum(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    """The running sums along ``dim``: element i is the sum of elements 0..i. Dtypes as
    :func:`sum`.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    return CumSum.apply(_cast(input, dtype, "cumsum"), dim, dtype)


def _extremum(name: str, input: Any, dim: Any, keepdim: bool, largest: bool) -> Any:  # noqa: A002
    x = tensor_arg(input, name)
    if isinstance(dim, Tensor):  # max(input, other): the element-wise form
        return maximum(x, dim) if largest else minimum(x, dim)
    if dim is None:
        return ExtremumAll.apply(x, largest)
    if not isinstance(dim, int):
        raise TypeError(f"{name}(): dim must be an int, got {type(dim).__name__}")
    values, indices = ExtremumAlongDim.apply(x, dim, keepdim, largest)
    return ValuesIndices(values, indices.detach_())  # indices are integers: no history, as in PyTorch


@accepts_out("exact_tuples")
def max(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001,A002 - mirrors torch.max
    """The largest element; with ``dim``, ``(values, indices)`` along it (``.values``,
    ``.indices``); with a tensor second argument, the element-wise maximum."""
    return _extremum("max", input, dim, keepdim, True)


@accepts_out("exact_tuples")
def min(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001,A002 - mirrors torch.min
    """The smallest element; with ``dim``, ``(values, indices)`` along it; with a tensor second
    argument, the element-wise minimum."""
    return _extremum("min", input, dim, keepdim, False)


@accepts_out("exact")
def argmax(input: Any, dim: int | None = None, keepdim: bool = False) -> Any:  # noqa: A002
    """int64 index of the largest element (into the flattened tensor when ``dim`` is None).

    Raises:
        DTypeError: a bool tensor (PyTorch refuses it too).
    """
    return Tensor(dispatch_reduce.argmax(_not_bool(input, "argmax")._data, dim, keepdim, True))


@accepts_out("exact")
def argmin(input: Any, dim: int | None = None, keepdim: bool = False) -> Any:  # noqa: A002
    """int64 index of the smallest element (into the flattened tensor when ``dim`` is None; a bool
    tensor raises as :func:`argmax`)."""
    return Tensor(dispatch_reduce.argmax(_not_bool(input, "argmin")._data, dim, keepdim, False))


def _not_bool(input: Any, name: str) -> Any:  # noqa: A002
    x = tensor_arg(input, name)
    if x.dtype.kind == "b":
        raise DTypeError(f"{name}(): does not support bool input")
    return x


def _correction(dim: Any, unbiased: bool | None, correction: float | None) -> tuple[Any, float]:
    if isinstance(dim, bool):  # var(input, unbiased): the legacy positional form
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise ValueError("var/std: cannot specify both unbiased and correction")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


def _var(name: str, input: Any, dim: Any, unbiased: bool | None, keepdim: bool,  # noqa: A002
         correction: float | None, take_sqrt: bool) -> Any:
    x = tensor_arg(input, name)
    if not is_floating(x.dtype):
        raise DTypeError("std and var only support floating point and complex dtypes")
    dim, correction = _correction(dim, unbiased, correction)
    return Var.apply(x, _all_if_empty(dim), correction, keepdim, take_sqrt)


@accepts_out()
def var(input: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
        correction: float | None = None) -> Any:
    """Variance over ``dim`` (int, tuple, or None for all): sum of squared deviations divided by
    N - correction (default correction 1, Bessel's; ``unbiased=False`` means 0)."""
    return _var("var", input, dim, unbiased, keepdim, correction, False)


@accepts_out()
def std(input: Any, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
        correction: float | None = None) -> Any:
    """Standard deviation: the square root of :func:`var` (same arguments)."""
    return _var("std", input, dim, unbiased, keepdim, correction, True)


@accepts_out()
@autocast_op()
def logsumexp(input: Any, dim: Any, keepdim: bool = False) -> Any:  # noqa: A002
    """log(sum(exp(input))) over ``dim`` (int or tuple), computed without overflow."""
    return LogSumExp.apply(tensor_arg(input, "logsumexp"), dim, keepdim)
