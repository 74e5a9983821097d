"""Numba kernels of the classification losses in their general form, and of the L1/L2 element
losses before reduction.

Class losses work on (M, C) rows with (M,) int64 targets (M = N * d1 * ..., the class axis moved
last). ``weight`` is (C,) or empty (no class weights); a row whose target equals
``ignore_index`` contributes nothing. Each writes the per-row loss and the per-row weight
w[target] (0 when ignored), from which the caller forms PyTorch's reductions ('mean' divides by
the sum of those weights). Backward kernels take ``row_grad`` of size M, or of size 1 for one
value broadcast to every row.

Cross-entropy with label smoothing eps is PyTorch's
``(1 - eps) * nll(log_softmax(x)) + eps / C * sum_c(-w_c log_softmax(x)_c)``.
A reduced cross-entropy without weights or smoothing runs on the fused kernel
:func:`zgrad.kernels.cpu.kernels.rowwise.cross_entropy_forward` instead.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel
from zgrad.kernels.cpu.kernels.rowwise import _exp_shifted, _row_max

__all__ = [
    "class_loss_backward",
    "class_loss_forward",
    "nll_backward",
    "nll_forward",
    "pointwise_loss_backward",
    "pointwise_loss_forward",
    "pointwise_loss_sum",
]


@kernel
def _class_weight(weight, target):
    return weight[target] if weight.size > 0 else weight.dtype.type(1)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY, reduction=True)
def class_loss_forward(logits, targets, weight, ignore_index, smoothing, probs_out, loss_out, weight_out):
    """probs_out = softmax(logits); per-row smoothed, weighted cross-entropy into loss_out.

    ``probs_out`` must not overlap ``logits``.
    """
    n, c = logits.shape
    for i in prange(n):
        row = logits[i]
        peak = _row_max(row)
        total = _exp_shifted(row, peak, probs_out[i])
        inv_total = probs_out.dtype.type(1.0 / total)
        for j in range(c):
            probs_out[i, j] *= inv_total
        target = targets[i]
        if target == ignore_index:
            loss_out[i] = 0
            weight_out[i] = 0
            continue
        shift = np.float64(peak) + math.log(total)  # log_softmax(row) = row - shift
        w_target = _class_weight(weight, target)
        loss = (1.0 - smoothing) * np.float64(w_target) * (shift - row[target])
        if smoothing > 0.0:
            smooth = 0.0
            for j in range(c):
                smooth += np.float64(_class_weight(weight, j)) * (shift - row[j])
            loss += smoothing / c * smooth
        loss_out[i] = loss
        weight_out[i] = w_target


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def class_loss_backward(probs, targets, weight, ignore_index, smoothing, row_grad, out):
    """out = d loss / d logits: g (1-eps) w_t (p - onehot(t)) + g eps/C (sum(w) p - w) per row."""
    n, c = probs.shape
    F = out.dtype.type
    weight_sum = 0.0
    for j in range(c):
        weight_sum += np.float64(_class_weight(weight, j))
    broadcast = row_grad.size == 1
    for i in prange(n):
        target = targets[i]
        if target == ignore_index:
            for j in range(c):
                out[i, j] = F(0)
            continue
        g = np.float64(row_grad[0] if broadcast else row_grad[i])
        hard = F(g * (1.0 - smoothing) * np.float64(_class_weight(weight, target)))
        soft = F(g * smoothing / c)
        soft_total = F(g * smoothing / c * weight_sum)
        for j in range(c):
            out[i, j] = hard * probs[i, j] + soft_total * probs[i, j] - soft * _class_weight(weight, j)
        out[i, target] -= hard


@kernel
def nll_forward(log_probs, targets, weight, ignore_index, loss_out, weight_out):
    """loss_out[i] = -w[t_i] * log_probs[i, t_i]; weight_out[i] = w[t_i] (both 0 when ignored)."""
    for i in range(targets.size):
        target = targets[i]
        if target == ignore_index:
            loss_out[i] = 0
            weight_out[i] = 0
        else:
            w_target = _class_weight(weight, target)
            loss_out[i] = -w_target * log_probs[i, target]
            weight_out[i] = w_target


@kernel
def nll_backward(targets, weight, ignore_index, row_grad, out):
    """out = -g_i * w[t_i] at (i, t_i), 0 elsewhere and on ignored rows."""
    broadcast = row_grad.size == 1
    zero = out.dtype.type(0)
    for i in range(targets.size):
        for j in range(out.shape[1]):
            out[i, j] = zero
        target = targets[i]
        if target != ignore_index:
            g = row_grad[0] if broadcast else row_grad[i]
            out[i, target] = -g * _class_weight(weight, target)


@parallel_kernel()
def pointwise_loss_forward(a, b, squared, out):
    """out = (a - b)**2 if ``squared`` else |a - b|."""
    if squared:
        for i in prange(a.size):
            d = a[i] - b[i]
            out[i] = d * d
    else:
        for i in prange(a.size):
            out[i] = abs(a[i] - b[i])


@parallel_kernel(reduction=True)
def pointwise_loss_sum(a, b, squared):
    """Return sum((a - b)**2) if ``squared`` else sum(|a - b|) as a Python float, summed in float64
    (a reduced loss in one pass, without the per-element array)."""
    total = 0.0
    if squared:
        for i in prange(a.size):
            d = np.float64(a[i] - b[i])
            total += d * d
    else:
        for i in prange(a.size):
            total += abs(np.float64(a[i] - b[i]))
    return total


@parallel_kernel()
def pointwise_loss_backward(a, b, grad, squared, divisor, out):
    """out = g * 2 (a - b) if ``squared`` else g * sign(a - b), g = grad / ``divisor`` (a reduced
    loss's count; ``grad`` of size 1 broadcasts, and only then is divided)."""
    F = out.dtype.type
    two, one, zero = F(2), F(1), F(0)
    if grad.size == 1:
        g = grad[0] / F(divisor)
        g2 = g * two
        if squared:
            for i in prange(a.size):
                out[i] = g2 * (a[i] - b[i])
        else:
            for i in prange(a.size):
                d = a[i] - b[i]
                out[i] = g * (one if d > zero else (-one if d < zero else zero))
    elif squared:
        for i in prange(a.size):
            out[i] = grad[i] * two * (a[i] - b[i])
    else:
        for i in prange(a.size):
            d = a[i] - b[i]
            out[i] = grad[i] * (one if d > zero else (-one if d < zero else zero))
