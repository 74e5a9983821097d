"""Numba kernels of group and layer normalization, forward and backward, each fused, and the
helpers batch norm (:mod:`batch_norm`) shares.

Inputs are C-contiguous (N, C, S) arrays (S = the product of the spatial sizes; 1 for (N, C)).
Group norm normalizes each (sample, group) row of (C/G)*S contiguous elements; layer norm is
group norm with one group and S = 1 over the (rows, normalized size) view, its affine parameters
then varying along the row. One task per row: its statistics pass reads the row once, its output
pass finds it still in cache.

Statistics are shifted sums in float64 (``sum(x - k)``, ``sum((x - k)**2)`` with k the row's first
element): one pass, without the cancellation of ``E[x**2] - E[x]**2`` when |mean| >> std. The
output is ``x * scale + shift`` with per-channel float64 constants rounded once to the data's
dtype, as PyTorch computes it. ``weight`` and ``bias`` may be empty (size 0): no affine term.
Saved statistics (mean, 1/sqrt(var + eps)) are written to ``save_mean`` / ``save_invstd``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel

__all__ = ["affine", "grad_sums", "group_norm_backward", "group_norm_forward", "shifted_sums"]


@kernel(reduction=True)
def shifted_sums(values, shift):
    """(sum(v - shift), sum((v - shift)**2)) over a 1-D array, in float64."""
    total, squares = 0.0, 0.0
    for k in range(values.size):
        d = np.float64(values[k]) - shift
        total += d
        squares += d * d
    return total, squares


@kernel(reduction=True)
def grad_sums(grad, values, mean):
    """(sum(grad), sum(grad * (values - mean))) over 1-D arrays, in float64."""
    total, dot = 0.0, 0.0
    for k in range(values.size):
        g = np.float64(grad[k])
        total += g
        dot += g * (np.float64(values[k]) - mean)
    return total, dot


@kernel
def affine(values, scale, shift, out):
    """out = values * scale + shift, with the constants rounded to the data's dtype."""
    scale_, shift_ = out.dtype.type(scale), out.dtype.type(shift)
    for k in range(values.size):
        out[k] = values[k] * scale_ + shift_


@kernel
def _affine_elementwise(values, mean, invstd, weight, bias, out):
    """out = (values - mean) * invstd * weight + bias with per-element (possibly empty) weight and bias."""
    t = out.dtype.type
    mean_, invstd_ = t(mean), t(invstd)
    for k in range(values.size):
        y = (values[k] - mean_) * invstd_
        if weight.size:
            y *= weight[k]
        if bias.size:
            y += bias[k]
        out[k] = y


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY, reduction=True)
def group_norm_forward(x, weight, bias, groups, eps, out, save_mean, save_invstd):
    """Group norm of (N, C, S) ``x`` over each (sample, group) row; ``save_*`` are (N*G,)."""
    batch, channels, size = x.shape
    per_group = channels // groups
    count = per_group * size
    rows = x.reshape(batch * groups, count)
    out_rows = out.reshape(batch * groups, count)
    for r in prange(batch * groups):
        row, out_row = rows[r], out_rows[r]
        shift = np.float64(row[0])
        total, squares = shifted_sums(row, shift)
        mean_shifted = total / count
        mean = shift + mean_shifted
        invstd = 1.0 / math.sqrt(max(squares / count - mean_shifted * mean_shifted, 0.0) + eps)
        save_mean[r] = mean
        save_invstd[r] = invstd
        first = (r % groups) * per_group
        if not weight.size and not bias.size:
            affine(row, invstd, -mean * invstd, out_row)
        elif size == 1:  # layer norm's view: the affine parameters change at every element
            _affine_elementwise(row, mean, invstd, weight[first:first + count], bias[first:first + count], out_row)
        else:
            for j in range(per_group):
                scale = (np.float64(weight[first + j]) if weight.size else 1.0) * invstd
                offset = (np.float64(bias[first + j]) if bias.size else 0.0) - mean * scale
                affine(row[j * size:(j + 1) * size], scale, offset, out_row[j * size:(j + 1) * size])


@kernel(reduction=True)
def _elementwise_grad_sums(grad, values, weight, mean, invstd, partial_weight, partial_bias):
    """One row with per-element weights: partial_weight += dy * xhat, partial_bias += dy;
    returns (sum(g), sum(g * (x - mean))) with g = dy * weight."""
    total, dot = 0.0, 0.0
    for k in range(values.size):
        dy = np.float64(grad[k])
        centered = np.float64(values[k]) - mean
        partial_bias[k] += dy
        partial_weight[k] += dy * centered * invstd
        g = dy * np.float64(weight[k]) if weight.size else dy
        total += g
        dot += g * centered
    return total, dot


@kernel
def _row_grad(grad, values, weight, mean, mean_g, k, invstd, out):
    """out = (dy * weight - mean_g - (x - mean) * k) * invstd for one channel's run (scalar weight)."""
    t = out.dtype.type
    weight_, mean_, mean_g_, k_, invstd_ = t(weight), t(mean), t(mean_g), t(k), t(invstd)
    for j in range(values.size):
        out[j] = (grad[j] * weight_ - mean_g_ - (values[j] - mean_) * k_) * invstd_


@kernel
def _row_grad_elementwise(grad, values, weight, mean, mean_g, k, invstd, out):
    """:func:`_row_grad` with a weight per element (or none: an empty ``weight``)."""
    t = out.dtype.type
    mean_, mean_g_, k_, invstd_ = t(mean), t(mean_g), t(k), t(invstd)
    for j in range(values.size):
        g = grad[j] * weight[j] if weight.size else grad[j]
        out[j] = (g - mean_g_ - (values[j] - mean_) * k_) * invstd_


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY, reduction=True)
def group_norm_backward(grad, x, weight, save_mean, save_invstd, groups, n_tasks, grad_x, grad_weight, grad_bias):
    """Gradients of :func:`group_norm_forward`; empty ``grad_*`` outputs are skipped.

    Per row, with g = dy * weight[c] and xhat = (x - mean) * invstd:
    dx = invstd * (g - mean(g) - xhat * mean(g * xhat)); dweight[c] and dbias[c] sum dy * xhat and
    dy over every row and position of channel c. Those sums are gathered per task (``n_tasks``
    tasks, one per thread: see :meth:`ParallelKernel.task_count`) in float64 partials and added up after the
    parallel loop, so tasks never write the same element.
    """
    batch, channels, size = x.shape
    per_group = channels // groups
    count = per_group * size
    n_rows = batch * groups
    rows, grad_rows, grad_x_rows = x.reshape(n_rows, count), grad.reshape(n_rows, count), grad_x.reshape(-1)
    n_tasks = max(1, min(n_rows, n_tasks))
    partial_weight = np.zeros((n_tasks, channels))
    partial_bias = np.zeros((n_tasks, channels))
    for task in prange(n_tasks):
        for r in range(task * n_rows // n_tasks, (task + 1) * n_rows // n_tasks):
            row, grad_row = rows[r], grad_rows[r]
            mean, invstd = np.float64(save_mean[r]), np.float64(save_invstd[r])
            first = (r % groups) * per_group
            if size == 1:
                total, dot = _elementwise_grad_sums(
                    grad_row, row, weight[first:first + per_group], mean, invstd,
                    partial_weight[task, first:first + per_group], partial_bias[task, first:first + per_group])
            else:
                total, dot = 0.0, 0.0
                for j in range(per_group):
                    w = np.float64(weight[first + j]) if weight.size else 1.0
                    t, d = grad_sums(grad_row[j * size:(j + 1) * size], row[j * size:(j + 1) * size], mean)
                    partial_bias[task, first + j] += t
                    partial_weight[task, first + j] += d * invstd
                    total += w * t
                    dot += w * d
            if not grad_x.size:
                continue
            mean_g, k = total / count, dot / count * invstd * invstd
            out_row = grad_x_rows[r * count:(r + 1) * count]
            if size == 1:
                _row_grad_elementwise(grad_row, row, weight[first:first + per_group], mean, mean_g, k, invstd, out_row)
            else:
                for j in range(per_group):
                    w = np.float64(weight[first + j]) if weight.size else 1.0
                    seg = slice(j * size, (j + 1) * size)
                    _row_grad(grad_row[seg], row[seg], w, mean, mean_g, k, invstd, out_row[seg])
    # Plain loops: in the parallel variant an array expression here (partial[:, c].sum()) would
    # become a parallel region per channel.
    for c in range(channels):
        total_weight, total_bias = 0.0, 0.0
        for task in range(n_tasks):
            total_weight += partial_weight[task, c]
            total_bias += partial_bias[task, c]
        if grad_weight.size:
            grad_weight[c] = total_weight
        if grad_bias.size:
            grad_bias[c] = total_bias
