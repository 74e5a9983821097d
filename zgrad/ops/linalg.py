"""Matrix products: ``matmul`` with numpy semantics and the fused ``linear``; both factors must
have one dtype, as PyTorch's (the family built on them: :mod:`zgrad.ops.products`)."""

from __future__ import annotations

from typing import Any

from zgrad.autograd.function import Op, on_graph
from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch
from zgrad.ops.reduce import formula_sum
from zgrad.tensor import Tensor


def _swap_last(a):
    return a.swapaxes(-1, -2)


def formula_matmul(a: Any, b: Any) -> Any:
    """``a @ b`` in a backward formula (recorded when a tensor takes part)."""
    return MatMul.apply(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else dispatch.matmul(a, b)


def _formula_sum_to(x: Any, shape: tuple[int, ...]) -> Any:
    """``x`` summed down to ``shape``, which broadcasts to its shape."""
    if x.shape == shape:
        return x
    if not on_graph(x):
        return dispatch.sum_to(x, shape)
    return formula_sum(x, dispatch.broadcast_axes(x.shape, shape), keepdim=True).reshape(shape)


class MatMul(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return dispatch.matmul(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        # Promote vectors to matrices so one rule covers every case, then undo the promotion.
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        g2 = grad
        if a.ndim == 1:
            g2 = g2.reshape(g2.shape[:-1] + (1,) + g2.shape[-1:]) if b.ndim > 1 else g2.reshape(1, *g2.shape)
        if b.ndim == 1:
            g2 = g2.reshape(g2.shape + (1,))
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = _formula_sum_to(formula_matmul(g2, _swap_last(b2)), a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            gb = _formula_sum_to(formula_matmul(_swap_last(a2), g2), b2.shape).reshape(b.shape)
        return ga, gb


class Linear(Op):
    """y = x @ weight.T + bias, with the bias added in place into the product.

    An input of more than two dimensions runs as one (rows, in_features) matrix: made contiguous
    first where its layout does not fold (a transposed sequence-first view, as attention passes),
    and that matrix is what backward keeps, so the copy is made once for both passes."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        if x.shape[-1] != weight.shape[-1]:
            raise ShapeError(
                f"linear: input has {x.shape[-1]} features in its last dimension but the weight "
                f"{list(weight.shape)} expects {weight.shape[-1]}"
            )
        if x.dtype != weight.dtype:
            raise DTypeError(f"mat1 and mat2 must have the same dtype, but got {dispatch.scalar_type_name(x.dtype)} and "
                             f"{dispatch.scalar_type_name(weight.dtype)}")
        rows = dispatch.contiguous(x).reshape(-1, x.shape[-1]) if x.ndim > 2 else x
        ctx.save_for_backward(rows, weight)
        ctx.input_shape = x.shape
        if bias is not None and bias.ndim == 1 and bias.dtype == x.dtype and bias.shape[0] == weight.shape[0]:
            out = dispatch.matmul(rows, weight.T, bias)  # one pass where the backend fuses the addition
        else:
            out = dispatch.matmul(rows, weight.T)
            if bias is not None:
                dispatch.add_inplace(out, bias)
        return out.reshape(*x.shape[:-1], weight.shape[0]) if x.ndim > 2 else out

    @staticmethod
    def backward(ctx, grad):
        rows, weight = ctx.saved_tensors
        if on_graph(grad) and not on_graph(rows):  # the folded copy of the input: put it on the graph
            rows = ctx.as_input(0, rows.reshape(ctx.input_shape)).reshape(-1, ctx.input_shape[-1])
        needs = ctx.needs_input_grad
        g2 = grad.reshape(-1, grad.shape[-1])
        gx = formula_matmul(g2, weight).reshape(ctx.input_shape) if needs[0] else None
        rows2 = rows.reshape(-1, rows.shape[-1])
        if len(needs) == 3 and needs[1] and needs[2] and not on_graph(g2) and not on_graph(rows2) \
                and g2.dtype == rows2.dtype:  # both in one pass where the backend fuses them
            return (gx, *dispatch.matmul_with_row_sums(_swap_last(g2), rows2))
        gw = formula_matmul(_swap_last(g2), rows2) if needs[1] else None
        if len(needs) == 2:  # applied without a bias
            return gx, gw
        return gx, gw, (formula_sum(g2, 0) if needs[2] else None)
