"""Row-wise Numba kernels over 2-D (N, C) C-contiguous arrays: the last axis is the row.

Rows are split across threads; each row is read from memory once and its max/sum passes run on
cache-resident data. Row sums are returned in float64.

Aliasing: Numba compiles the body of a ``prange`` loop with ``noalias`` arguments, so LLVM may
move any load past any store to another array. A kernel is therefore alias-safe only if every
output element depends on nothing but the same position of the inputs and on row reductions
finished before the first store. All kernels here are written that way, so ``out`` may be the same
array as an input, except ``cross_entropy_forward``: its ``probs_out`` must not overlap ``logits``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from zgrad.kernels.cpu.kernels import vector_math
from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel

__all__ = [
    "bias_act_forward",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "log_softmax_backward",
    "log_softmax_forward",
    "softmax_backward",
    "softmax_forward",
]

ACT_IDENTITY, ACT_RELU, ACT_TANH, ACT_SIGMOID = 0, 1, 2, 3


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def bias_act_forward(x, bias, act, out):
    """out = act(x + bias[None, :]); act: 0 identity, 1 relu, 2 tanh, 3 sigmoid."""
    if act < ACT_IDENTITY or act > ACT_SIGMOID:
        raise ValueError("bias_act_forward: act must be 0 (identity), 1 (relu), 2 (tanh) or 3 (sigmoid)")
    n, c = x.shape
    for i in prange(n):
        # One loop per activation, so that each inner loop vectorises.
        if act == ACT_IDENTITY:
            for j in range(c):
                out[i, j] = x[i, j] + bias[j]
        elif act == ACT_RELU:
            for j in range(c):
                out[i, j] = vector_math.relu(x[i, j] + bias[j])
        elif act == ACT_TANH:
            for j in range(c):
                out[i, j] = vector_math.tanh(x[i, j] + bias[j])
        else:
            for j in range(c):
                out[i, j] = vector_math.sigmoid(x[i, j] + bias[j])


@kernel
def _row_max(row):
    """max(row): -inf if empty, NaN if the row has a NaN (as numpy's max)."""
    peak = row.dtype.type(-math.inf)
    for j in range(row.size):
        peak = vector_math.maximum(peak, row[j])
    return peak


# Sums of exp run in blocks: the block sum in the row's dtype keeps the loop at full vector width
# (a float64 accumulator would halve it), the float64 total keeps long rows accurate.
_SUM_BLOCK = 256


@kernel(reduction=True)
def _exp_shifted(row, shift, out_row):
    """out_row = exp(row - shift); return its sum (float64)."""
    total = 0.0
    for start in range(0, row.size, _SUM_BLOCK):
        block, out_block = row[start:start + _SUM_BLOCK], out_row[start:start + _SUM_BLOCK]
        block_sum = row.dtype.type(0)
        for j in range(block.size):
            e = vector_math.exp(block[j] - shift)
            out_block[j] = e
            block_sum += e
        total += block_sum
    return total


@kernel(reduction=True)
def _sum_exp_shifted(row, shift):
    """sum(exp(row - shift)) (float64)."""
    total = 0.0
    for start in range(0, row.size, _SUM_BLOCK):
        block = row[start:start + _SUM_BLOCK]
        block_sum = row.dtype.type(0)
        for j in range(block.size):
            block_sum += vector_math.exp(block[j] - shift)
        total += block_sum
    return total


@kernel
def _check_targets(targets, num_classes, ignore_index):
    for i in range(targets.size):
        if (targets[i] < 0 or targets[i] >= num_classes) and targets[i] != ignore_index:
            raise IndexError("cross_entropy: a target is outside [0, C) and not ignore_index")


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def softmax_forward(x, out):
    """out = softmax(x) over the last axis (max-subtracted)."""
    for i in prange(x.shape[0]):
        total = _exp_shifted(x[i], _row_max(x[i]), out[i])
        inv_total = out.dtype.type(1.0 / total)
        for j in range(x.shape[1]):
            out[i, j] *= inv_total


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def log_softmax_forward(x, out):
    """out = x - max - log(sum(exp(x - max))) over the last axis."""
    for i in prange(x.shape[0]):
        peak = _row_max(x[i])
        log_total = out.dtype.type(math.log(_sum_exp_shifted(x[i], peak)))
        for j in range(x.shape[1]):
            out[i, j] = (x[i, j] - peak) - log_total


@parallel_kernel(reduction=True)
def softmax_backward(grad, y, out):
    """out = y * (grad - sum(grad * y, row)), with y the softmax output."""
    for i in prange(y.shape[0]):
        dot = 0.0
        for j in range(y.shape[1]):
            dot += np.float64(grad[i, j]) * np.float64(y[i, j])
        dot_ = out.dtype.type(dot)
        for j in range(y.shape[1]):
            out[i, j] = y[i, j] * (grad[i, j] - dot_)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY, reduction=True)
def log_softmax_backward(grad, y, out):
    """out = grad - exp(y) * sum(grad, row), with y the log_softmax output."""
    for i in prange(y.shape[0]):
        total = 0.0
        for j in range(y.shape[1]):
            total += grad[i, j]
        total_ = out.dtype.type(total)
        for j in range(y.shape[1]):
            out[i, j] = grad[i, j] - vector_math.exp(y[i, j]) * total_


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY, reduction=True)
def cross_entropy_forward(logits, targets, ignore_index, probs_out):
    """probs_out = softmax(logits); return (the sum of -log_softmax(logits)[i, targets[i]] over the
    rows whose target is not ``ignore_index``, the number of those rows).

    The log-probability is x - max - log(sum(exp(x - max))), never log(prob), so it stays finite
    when the probability underflows to 0. ``targets`` is int64 (N,) with values in [0, C) or equal
    to ``ignore_index``; ``probs_out`` must not overlap ``logits``.
    """
    n, c = logits.shape
    _check_targets(targets, c, ignore_index)
    loss_sum = 0.0
    counted = 0
    for i in prange(n):
        peak = _row_max(logits[i])
        total = _exp_shifted(logits[i], peak, probs_out[i])
        inv_total = probs_out.dtype.type(1.0 / total)
        for j in range(c):
            probs_out[i, j] *= inv_total
        target = targets[i]
        if target != ignore_index:
            loss_sum += math.log(total) - (logits[i, target] - peak)
            counted += 1
    return loss_sum, counted


@parallel_kernel()
def cross_entropy_backward(probs, targets, ignore_index, scale, out):
    """out = scale * (probs - onehot(targets)), 0 on rows whose target is ``ignore_index``;
    ``out`` may alias ``probs``."""
    n, c = probs.shape
    _check_targets(targets, c, ignore_index)
    scale_ = out.dtype.type(scale)
    one, zero = out.dtype.type(1), out.dtype.type(0)
    for i in prange(n):
        target = targets[i]
        if target == ignore_index:
            for j in range(c):
                out[i, j] = zero
        else:
            for j in range(c):
                out[i, j] = scale_ * (probs[i, j] - (one if j == target else zero))
