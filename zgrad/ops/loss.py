"""Softmax family and losses, on fused row-wise kernels."""

from __future__ import annotations

import numpy as np

from zgrad.autograd.function import Op
from zgrad.kernels import dispatch as D


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
        out = D.rowwise(cls.kernel, moved)
        ctx.save_for_backward(out)
        return _from_last(out, ctx.inverse)

    @classmethod
    def backward(cls, ctx, grad):
        (out,) = ctx.saved_tensors
        moved, _ = _to_last(grad, ctx.dim)
        return _from_last(D.rowwise_backward(f"{cls.kernel}_backward", moved, out), ctx.inverse), None


class Softmax(_RowwiseOp):
    kernel = "softmax"


class LogSoftmax(_RowwiseOp):
    kernel = "log_softmax"


def _check_targets(logits, targets):
    if logits.ndim != 2:
        raise ValueError(f"cross_entropy expects logits of shape (N, C), got {list(logits.shape)}")
    if targets.dtype.kind not in "iu":
        raise ValueError(f"cross_entropy expects integer class targets, got dtype {targets.dtype}")
    if targets.shape != logits.shape[:1]:
        raise ValueError(f"cross_entropy: targets of shape {list(targets.shape)} do not match logits of shape {list(logits.shape)}; expected ({logits.shape[0]},)")
    if targets.size:
        low, high = int(targets.min()), int(targets.max())
        if low < 0 or high >= logits.shape[1]:
            bad = low if low < 0 else high
            raise IndexError(f"Target {bad} is out of bounds: expected class indices in [0, {logits.shape[1] - 1}]")


class CrossEntropy(Op):
    """Mean over rows of -log softmax(logits)[i, target_i]."""

    @staticmethod
    def forward(ctx, logits, targets):
        _check_targets(logits, targets)
        logits = logits if logits.dtype.kind == "f" else D.cast(logits, D.float_dtype(logits.dtype))
        loss, probs = D.cross_entropy(logits, targets)
        ctx.save_for_backward(probs, targets)
        return D.full((), loss, logits.dtype)

    @staticmethod
    def backward(ctx, grad):
        probs, targets = ctx.saved_tensors
        scale = float(grad) / max(probs.shape[0], 1)
        return D.cross_entropy_backward(probs, targets, scale), None


class MseLoss(Op):
    """Mean of squared differences of two tensors of the same shape."""

    @staticmethod
    def forward(ctx, a, b):
        if a.shape != b.shape:
            raise ValueError(f"mse_loss: input shape {list(a.shape)} and target shape {list(b.shape)} differ")
        dtype = D.float_dtype(np.result_type(a, b))
        a = a if a.dtype == dtype else D.cast(a, dtype)
        b = b if b.dtype == dtype else D.cast(b, dtype)
        ctx.save_for_backward(a, b)
        ctx.count = max(a.size, 1)
        return D.full((), D.mse(a, b) / ctx.count, dtype)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = D.mse_backward(a, b, 2.0 * float(grad) / ctx.count)
        return ga, (D.unary("neg", ga) if ctx.needs_input_grad[1] else None)
