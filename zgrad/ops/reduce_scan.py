"""Running reductions along one dimension: cumprod, cummax, cummin, logcumsumexp (cumsum is in
:mod:`zgrad.ops.reduce`).

Running products of bool and integer tensors are int64, as PyTorch's (and as cumsum's); a
``dtype=`` argument casts the input first. cummax/cummin keep the input's dtype and return
``(values, indices)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad import return_types
from zgrad.autograd.function import Op, on_graph
from zgrad.kernels import dispatch, dispatch_index, dispatch_scan
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.ops._args import tensor_arg
from zgrad.ops.backward_ops import detached
from zgrad.ops.elementwise import formula_add, formula_div, formula_mul
from zgrad.ops.reduce import _cast
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = ["cumprod", "cummax", "cummin", "logcumsumexp"]


class CumProd(Op):
    """Running products along ``dim``; the gradient is exact where the input holds zeros (one or
    several), computed without a division."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, dtype):
        ctx.dim = dim
        ctx.save_for_backward(x)
        return dispatch_scan.cumprod(x, dim, dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if on_graph(grad):
            return CumProd.formula(grad, ctx.as_input(0, detached(x)), ctx.dim), None, None
        return dispatch_scan.cumprod_backward(x, grad, ctx.dim), None, None

    @staticmethod
    def formula(grad, x, dim):
        """The gradient recorded (create_graph): without zeros in x, the running sums from the end
        of grad * cumprod(x), over x; with zeros, for each i, sum over k >= i of grad[k] times the
        product of x[:k + 1] without x[i], from the running products of an (n, n) table holding x
        with 1 on its diagonal (n**2 memory along dim, as PyTorch's formula for this case)."""
        if x.ndim == 0:
            return grad
        if not bool((x.detach() == 0).any()):
            flipped = (grad * x.cumprod(dim)).flip(dim)
            return formula_div(flipped.cumsum(dim).flip(dim), x)
        rows, size = x.movedim(dim, -1), x.shape[dim]
        device = dispatch.device_type_of(x._data)

        def constant(array):
            return dispatch.asarray(array, x.dtype, device)

        diagonal = np.eye(size)
        # [..., i, k]: x[k], or 1 where k == i
        table = formula_add(formula_mul(rows.unsqueeze(-2), constant(1 - diagonal)), constant(diagonal))
        spread = formula_mul(grad.movedim(dim, -1).unsqueeze(-2), constant(np.triu(np.ones((size, size)))))  # k >= i
        return (table.cumprod(-1) * spread).sum(-1).movedim(-1, dim)


class CumExtremum(Op):
    """Running max (``largest``) or min along ``dim`` with the index each value came from; the
    gradient of each output goes to that index."""

    @staticmethod
    def forward(ctx, x, dim, largest):
        values, indices = dispatch_scan.cumextreme(x, dim, largest)
        ctx.shape, ctx.dim = x.shape, dispatch_index.normalize_dim(dim, x.ndim)
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, grad, _grad_indices):
        (indices,) = ctx.saved_tensors
        if not ctx.shape:
            return grad, None, None
        return dispatch_index.scatter_add(ctx.shape, grad.dtype, ctx.dim, indices, grad), None, None


class LogCumSumExp(Op):
    """log(cumsum(exp(x))) along ``dim``, one log-add-exp per step; the gradient of each output
    is the softmax of the elements it summed."""

    @staticmethod
    def forward(ctx, x, dim):
        result, rows, result_rows = dispatch_scan.logcumsumexp(x, dim)
        ctx.save_for_backward(rows, result_rows)
        return result

    @staticmethod
    def backward(ctx, grad):
        rows, result_rows = ctx.saved_tensors
        return dispatch_scan.logcumsumexp_backward(grad, rows, result_rows), None


@accepts_out("as_dtype")
@autocast_op()
def cumprod(input: Any, dim: int, *, dtype: Any = None) -> Any:  # noqa: A002
    """The running products along ``dim``: element i is the product of elements 0..i. Bool and
    integer tensors multiply in int64; ``dtype`` casts the input first.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    return CumProd.apply(_cast(input, dtype, "cumprod"), dim, dtype)


def _cumextremum(name: str, input: Any, dim: int, largest: bool) -> Any:  # noqa: A002
    values, indices = CumExtremum.apply(tensor_arg(input, name), dim, largest)
    return getattr(return_types, name)(values, indices.detach_())


@accepts_out("exact")
def cummax(input: Any, dim: int) -> Any:  # noqa: A002
    """``(values, indices)``: the running maximum along ``dim`` and the index each was taken from
    (the latest of equal values; a NaN propagates). The gradient goes to those indices.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    return _cumextremum("cummax", input, dim, True)


@accepts_out("exact")
def cummin(input: Any, dim: int) -> Any:  # noqa: A002
    """``(values, indices)``: the running minimum along ``dim`` (see :func:`cummax`).

    Raises:
        IndexError: ``dim`` is out of range.
    """
    return _cumextremum("cummin", input, dim, False)


@accepts_out("exact")
def logcumsumexp(input: Any, dim: int) -> Any:  # noqa: A002
    """log(cumsum(exp(input))) along ``dim``, computed without overflow or underflow.

    Raises:
        NotImplementedError: a bool or integer input (PyTorch's error).
        IndexError: ``dim`` is out of range.
    """
    x = tensor_arg(input, "logcumsumexp")
    if not is_floating(x.dtype):
        raise NotImplementedError(f'"logcumsumexp" not implemented for \'{scalar_type_name(x.dtype)}\'')
    return LogCumSumExp.apply(x, dim)
