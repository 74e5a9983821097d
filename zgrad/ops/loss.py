"""Softmax family and loss ops, on fused kernels (the public loss functions, with their argument
checks, are in :mod:`zgrad.ops.loss_functions`)."""

from __future__ import annotations

import numpy as np

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch
from zgrad.kernels import dispatch_loss as DL
from zgrad.kernels.promotion import result_type


def _to_last(x, dim):
    """``x`` with axis ``dim`` moved last, and the permutation that undoes it.

    Raises:
        IndexError: ``dim`` is out of range for ``x``.
    """
    n = max(x.ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    dim %= n
    if x.ndim == 0 or dim == x.ndim - 1:
        return x, None
    perm = [d for d in range(x.ndim) if d != dim] + [dim]
    return x.transpose(perm), tuple(np.argsort(perm))


def _from_last(x, inverse):
    return x if inverse is None else x.transpose(inverse)


class _RowwiseOp(Op):
    """An op over one axis, run by a fused row-wise kernel on that axis moved last."""

    kernel = ""

    @classmethod
    def forward(cls, ctx, x, dim):
        moved, ctx.inverse = _to_last(x, dim)
        ctx.dim = dim % max(x.ndim, 1)
        out = dispatch.rowwise(cls.kernel, moved)
        ctx.save_for_backward(out)
        return _from_last(out, ctx.inverse)

    @classmethod
    def backward(cls, ctx, grad):
        (out,) = ctx.saved_tensors
        moved, _ = _to_last(grad, ctx.dim)
        return _from_last(dispatch.rowwise_backward(f"{cls.kernel}_backward", moved, out), ctx.inverse), None


class Softmax(_RowwiseOp):
    kernel = "softmax"


class LogSoftmax(_RowwiseOp):
    kernel = "log_softmax"


def _common_float(a, b):
    dtype = dispatch.float_dtype(result_type(a, b))
    return dispatch.as_dtype(a, dtype), dispatch.as_dtype(b, dtype)


def _divide(total: float, divisor: float) -> float:
    """total / divisor; NaN for a 'mean' over nothing, as PyTorch."""
    return total / divisor if divisor else float("nan")


def _reduce_rows(loss, row_weight, reduction, shape):
    """The rows' losses reduced as PyTorch's nll_loss does: 'mean' divides by the sum of w[target]."""
    if reduction == "none":
        return loss.reshape(shape), None
    total = float(dispatch.reduce_sum(loss, dtype=np.float64))
    divisor = float(dispatch.reduce_sum(row_weight, dtype=np.float64)) if reduction == "mean" else 1.0
    return dispatch.full((), _divide(total, divisor), loss.dtype, dispatch.device_type_of(loss)), divisor


def _row_grad(grad, reduction, divisor, dtype):
    """The gradient reaching each row: the upstream values ('none') or one broadcast value."""
    if reduction == "none":
        return grad.reshape(-1)
    return dispatch.full((1,), _divide(float(grad), divisor), dtype, dispatch.device_type_of(grad))


class CrossEntropy(Op):
    """Cross-entropy of (M, C) logits against (M,) class indices, with class weights, an ignored
    index and label smoothing; reduced to ``shape`` ('none') or a scalar ('mean' divides by the
    total weight of the counted rows, 'sum').

    A reduced loss without weights or smoothing (what training loops use) runs on the fused
    softmax + cross-entropy kernel, which sums the rows' losses in the same pass; the rest on the
    general kernel, which keeps a loss and a weight per row.
    """

    @staticmethod
    def forward(ctx, logits, targets, weight, ignore_index, smoothing, reduction, shape):
        ctx.fused = weight is None and smoothing == 0.0 and reduction != "none"
        ctx.args, ctx.reduction = (targets, weight, ignore_index, smoothing), reduction
        if ctx.fused:
            total, counted, probs = DL.cross_entropy(logits, targets, ignore_index)
            ctx.divisor = float(counted) if reduction == "mean" else 1.0
            out = dispatch.full((), _divide(total, ctx.divisor), logits.dtype, dispatch.device_type_of(logits))
        else:
            loss, row_weight, probs = DL.class_loss(logits, targets, weight, ignore_index, smoothing)
            out, ctx.divisor = _reduce_rows(loss, row_weight, reduction, shape)
        ctx.save_for_backward(probs)
        return out

    @staticmethod
    def backward(ctx, grad):
        (probs,) = ctx.saved_tensors
        targets, _, ignore_index, _ = ctx.args
        if ctx.fused:
            grad_logits = DL.cross_entropy_backward(probs, targets, ignore_index, _divide(float(grad), ctx.divisor))
        else:
            row_grad = _row_grad(grad, ctx.reduction, ctx.divisor, probs.dtype)
            grad_logits = DL.class_loss_backward(probs, *ctx.args, row_grad)
        return (grad_logits, None, None, None, None, None, None)


class NllLoss(Op):
    """-w[t] * log_probs[i, t] of (M, C) log-probabilities against (M,) class indices, reduced to
    ``shape`` ('none') or a scalar."""

    @staticmethod
    def forward(ctx, log_probs, targets, weight, ignore_index, reduction, shape):
        loss, row_weight = DL.nll(log_probs, targets, weight, ignore_index)
        ctx.args = (targets, weight, ignore_index)
        ctx.input_shape, ctx.dtype, ctx.reduction = log_probs.shape, log_probs.dtype, reduction
        out, ctx.divisor = _reduce_rows(loss, row_weight, reduction, shape)
        return out

    @staticmethod
    def backward(ctx, grad):
        row_grad = _row_grad(grad, ctx.reduction, ctx.divisor, ctx.dtype)
        grad_input = DL.nll_backward(*ctx.args, row_grad, ctx.input_shape, ctx.dtype)
        return grad_input, None, None, None, None, None


class PointwiseLoss(Op):
    """(a - b)**2 (``squared``) or |a - b| of same-shaped tensors, reduced by 'none', 'sum' or
    'mean'; a reduced loss is summed in the same pass, without the per-element array."""

    @staticmethod
    def forward(ctx, a, b, squared, reduction):
        a, b = _common_float(a, b)
        ctx.save_for_backward(a, b)
        ctx.squared, ctx.reduction = squared, reduction
        if reduction == "none":
            return DL.pointwise_loss(a, b, squared)
        ctx.divisor = a.size if reduction == "mean" else 1.0
        return dispatch.full((), _divide(DL.pointwise_loss_sum(a, b, squared), ctx.divisor), a.dtype, dispatch.device_type_of(a))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        if ctx.reduction != "none":
            grad = dispatch.full((1,), _divide(float(grad), ctx.divisor), a.dtype, dispatch.device_type_of(a))
        ga = DL.pointwise_loss_backward(a, b, grad, ctx.squared)
        return ga, (dispatch.unary("neg", ga) if ctx.needs_input_grad[1] else None), None, None
