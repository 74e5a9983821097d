"""Matrix products: ``matmul`` with numpy semantics and the fused ``linear``; both factors must
have one dtype, as PyTorch's (the family built on them: :mod:`zgrad.ops.products`)."""

from __future__ import annotations

from zgrad.autograd.function import Op
from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch


def _swap_last(a):
    return a.swapaxes(-1, -2)


class MatMul(Op):
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
            ga = dispatch.sum_to(dispatch.matmul(g2, _swap_last(b2)), a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            gb = dispatch.sum_to(dispatch.matmul(_swap_last(a2), g2), b2.shape).reshape(b.shape)
        return ga, gb


class Linear(Op):
    """y = x @ weight.T + bias, with the bias added in place into the product.

    An input of more than two dimensions runs as one (rows, in_features) matrix: made contiguous
    first where its layout does not fold (a transposed sequence-first view, as attention passes),
    and that matrix is what backward keeps, so the copy is made once for both passes."""

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
        out = dispatch.matmul(rows, weight.T)
        if bias is not None:
            dispatch.add_inplace(out, bias)
        return out.reshape(*x.shape[:-1], weight.shape[0]) if x.ndim > 2 else out

    @staticmethod
    def backward(ctx, grad):
        rows, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        g2 = grad.reshape(-1, grad.shape[-1])
        gx = dispatch.matmul(g2, weight).reshape(ctx.input_shape) if needs[0] else None
        gw = dispatch.matmul(g2.T, rows.reshape(-1, rows.shape[-1])) if needs[1] else None
        if len(needs) == 2:  # applied without a bias
            return gx, gw
        return gx, gw, (dispatch.reduce_sum(g2, 0) if needs[2] else None)
