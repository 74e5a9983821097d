"""Softmax family and loss ops, on fused kernels (the public loss functions, with their argument
checks, are in :mod:`zgrad.ops.loss_functions`).

Backward runs the fused derivative kernels on arrays; in a pass with ``create_graph=True`` it
runs the same derivative as a formula of recorded ops (see :mod:`zgrad.ops.elementwise`)."""

from __future__ import annotations

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.kernels import dispatch
from zgrad.kernels import dispatch_loss as DL
from zgrad.kernels import dispatch_pointwise
from zgrad.kernels.promotion import result_type
from zgrad.ops.backward_ops import detached
from zgrad.ops.elementwise import Exp, formula_div, formula_mul, formula_sub
from zgrad.ops.reduce import formula_sum


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
    differentiable_backward = True

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
        if on_graph(grad):
            return cls.formula(grad, ctx.as_output(0, _from_last(detached(out), ctx.inverse)), ctx.dim), None
        moved, _ = _to_last(grad, ctx.dim)
        return _from_last(dispatch.rowwise_backward(f"{cls.kernel}_backward", moved, out), ctx.inverse), None

    @staticmethod
    def formula(grad, y, dim):
        raise NotImplementedError


class Softmax(_RowwiseOp):
    kernel = "softmax"

    @staticmethod
    def formula(grad, y, dim):
        return softmax_derivative(grad, y, dim)


class LogSoftmax(_RowwiseOp):
    kernel = "log_softmax"

    @staticmethod
    def formula(grad, y, dim):
        return formula_sub(grad, formula_mul(Exp.apply(y), formula_sum(grad, (dim,), keepdim=True)))


def softmax_derivative(grad, y, dim):
    """The gradient reaching softmax's input, from its output ``y``: y * (grad - sum(grad * y))."""
    return formula_mul(y, formula_sub(grad, formula_sum(formula_mul(grad, y), (dim,), keepdim=True)))


class ComputedSoftmax(Op):
    """The softmax over the last axis of an input whose softmax ``probs`` is already computed (a
    loss kept it): returns ``probs``, with softmax's backward to that input. The input's own values
    are not read (any array of its shape will do)."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, probs):
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx, grad):
        (probs,) = ctx.saved_tensors
        if on_graph(grad):
            return softmax_derivative(grad, ctx.as_output(0, detached(probs)), -1), None
        return dispatch.rowwise_backward("softmax_backward", grad, probs), None


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

    differentiable_backward = True

    @staticmethod
    def forward(ctx, logits, targets, weight, ignore_index, smoothing, reduction, shape):
        ctx.fused = weight is None and smoothing == 0.0 and reduction != "none"
        ctx.args, ctx.reduction = (targets, weight, ignore_index, smoothing), reduction
        if ctx.fused:
            out, ctx.divisor, probs = DL.cross_entropy(logits, targets, ignore_index, reduction == "mean")
        else:
            loss, row_weight, probs = DL.class_loss(logits, targets, weight, ignore_index, smoothing)
            out, ctx.divisor = _reduce_rows(loss, row_weight, reduction, shape)
        ctx.save_for_backward(probs)
        return out

    @staticmethod
    def backward(ctx, grad):
        (probs,) = ctx.saved_tensors
        targets, _, ignore_index, _ = ctx.args
        if on_graph(grad):
            return (CrossEntropy.formula(ctx, grad, probs), None, None, None, None, None, None)
        if ctx.fused:
            grad_logits = DL.cross_entropy_backward(probs, targets, ignore_index, grad, ctx.divisor)
        else:
            row_grad = _row_grad(grad, ctx.reduction, ctx.divisor, probs.dtype)
            grad_logits = DL.class_loss_backward(probs, *ctx.args, row_grad)
        return (grad_logits, None, None, None, None, None, None)

    @staticmethod
    def formula(ctx, grad, probs):
        """sum(q) softmax(logits) - q for each row's target distribution q (below), times grad (over
        the divisor when reduced), recorded: softmax(logits) on the graph is the kept ``probs``."""
        q = CrossEntropy.target_distribution(ctx, detached(probs))
        softmax = ComputedSoftmax.apply(ctx.as_input(0, detached(probs)), detached(probs))
        unit = formula_sub(formula_mul(softmax, dispatch.reduce_sum(q, (1,), keepdims=True)), q)
        if ctx.reduction == "none":
            return formula_mul(unit, grad.reshape(-1, 1))
        return formula_mul(unit, formula_div(grad, ctx.divisor))

    @staticmethod
    def target_distribution(ctx, probs):
        """The (M, C) weights q of each row's loss -sum_c q_c log softmax(logits)_c: w[t] at the
        target t, times 1 - eps, plus eps / C times the class weights w (all ones without
        ``weight``) with label smoothing eps; 0 in the ignored rows. A constant of the logits."""
        targets, weight, ignore_index, smoothing = ctx.args
        device = dispatch.device_type_of(probs)
        # nll's gradient for a row gradient of -1 is w[t] at each counted row's target, 0 elsewhere
        q = DL.nll_backward(targets, weight, ignore_index, dispatch.full((1,), -1.0, probs.dtype, device),
                            probs.shape, probs.dtype)
        if smoothing == 0.0:
            return q
        counted = dispatch.cast(dispatch_pointwise.compare("ne", targets, ignore_index), probs.dtype)
        classes = probs.shape[1]
        spread = counted.reshape(-1, 1) if weight is None else dispatch.binary(
            "mul", counted.reshape(-1, 1), dispatch.as_dtype(weight, probs.dtype).reshape(1, classes))
        return dispatch.binary("add", dispatch.binary("mul", q, 1.0 - smoothing),
                               dispatch.binary("mul", spread, smoothing / classes))


class NllLoss(Op):
    """-w[t] * log_probs[i, t] of (M, C) log-probabilities against (M,) class indices, reduced to
    ``shape`` ('none') or a scalar."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, log_probs, targets, weight, ignore_index, reduction, shape):
        loss, row_weight = DL.nll(log_probs, targets, weight, ignore_index)
        ctx.args = (targets, weight, ignore_index)
        ctx.input_shape, ctx.dtype, ctx.reduction = log_probs.shape, log_probs.dtype, reduction
        out, ctx.divisor = _reduce_rows(loss, row_weight, reduction, shape)
        return out

    @staticmethod
    def backward(ctx, grad):
        if on_graph(grad):  # linear in grad: the gradient for grad = 1, scaled by grad's rows
            ones = dispatch.full(grad.shape, 1, ctx.dtype, dispatch.device_type_of(detached(grad)))
            unit = DL.nll_backward(*ctx.args, _row_grad(ones, ctx.reduction, ctx.divisor, ctx.dtype),
                                   ctx.input_shape, ctx.dtype)
            return formula_mul(unit, _rows_of(grad, ctx.reduction)), None, None, None, None, None
        row_grad = _row_grad(grad, ctx.reduction, ctx.divisor, ctx.dtype)
        grad_input = DL.nll_backward(*ctx.args, row_grad, ctx.input_shape, ctx.dtype)
        return grad_input, None, None, None, None, None


def _rows_of(grad, reduction):
    """The upstream gradient as a column that scales each row of an (M, C) gradient."""
    return grad.reshape(-1, 1) if reduction == "none" else grad


class PointwiseLoss(Op):
    """(a - b)**2 (``squared``) or |a - b| of same-shaped tensors, reduced by 'none', 'sum' or
    'mean'; a reduced loss is summed in the same pass, without the per-element array."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, a, b, squared, reduction):
        a, b = _common_float(a, b)
        ctx.save_for_backward(a, b)
        ctx.squared, ctx.reduction = squared, reduction
        if reduction == "none":
            return DL.pointwise_loss(a, b, squared)
        ctx.divisor = a.size if reduction == "mean" else 1.0
        return DL.pointwise_loss_sum(a, b, squared, ctx.divisor)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        if on_graph(grad):
            return (*PointwiseLoss.formula(ctx, grad, a, b), None, None)
        divisor = 1.0
        if ctx.reduction != "none":  # divided in the kernel, on grad's device (an empty input's divisor: any)
            grad, divisor = grad.reshape(1), ctx.divisor or 1.0
        ga = DL.pointwise_loss_backward(a, b, grad, ctx.squared, divisor)
        return ga, (dispatch.unary("neg", ga) if ctx.needs_input_grad[1] else None), None, None

    @staticmethod
    def formula(ctx, grad, a, b):
        """2 (a - b) grad or sign(a - b) grad (over the divisor when reduced), for a and b, recorded."""
        a, b = ctx.as_input(0, detached(a)), ctx.as_input(1, detached(b))
        if ctx.reduction != "none":
            grad = formula_div(grad, ctx.divisor)
        if ctx.squared:
            ga = formula_mul(formula_mul(formula_sub(a, b), 2), grad)
        else:
            ga = formula_mul(dispatch.unary("sign", dispatch.binary("sub", detached(a), detached(b))), grad)
        return ga, (formula_mul(ga, -1) if ctx.needs_input_grad[1] else None)
