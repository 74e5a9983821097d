"""Numba kernels of batch normalization, forward and backward, each fused.

Inputs are C-contiguous (N, C, S) arrays (S = the product of the spatial sizes; 1 for (N, C)).
Each channel is normalized over (N, S), with statistics computed as in :mod:`norm` (shifted
float64 sums; output ``x * scale + offset`` with per-channel constants). Two ways to split the
work, by the length S of a (sample, channel) run:

- S >= ``SHORT_RUN`` (images): one task per channel. Its statistics pass reads the channel once
  and its output pass finds it still in cache (a channel of the 32x64x32x32 benchmark is 128 KB).
- shorter runs ((N, C) features): a loop per run would cost more in set-up than in arithmetic
  (bench/README.md, Design figures), so tasks take blocks of samples and sweep all
  channels at once, vectorized over C, keeping per-task partial sums; a second pass writes the
  output.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, kernel, parallel_kernel
from zgrad.kernels.cpu.kernels.norm import affine, grad_sums, shifted_sums

__all__ = ["SHORT_RUN", "batch_norm_backward", "batch_norm_forward"]

SHORT_RUN = 32


@kernel
def _output_constants(c, total, squares, shift, count, training, running_mean, running_var, momentum, eps,
                      weight, bias, save_mean, save_invstd):
    """Channel c's (scale, offset) with out = x * scale + offset; saves its mean and 1/sqrt(var + eps).

    Training: statistics from the shifted sums, and the running update
    ``r = (1 - momentum) * r + momentum * stat`` (unbiased variance) where running arrays are given.
    Evaluation: the running statistics.
    """
    if training:
        mean_shifted = total / count
        mean = shift + mean_shifted
        var = max(squares / count - mean_shifted * mean_shifted, 0.0)
        if running_mean.size:
            running_mean[c] = (1.0 - momentum) * running_mean[c] + momentum * mean
        if running_var.size:
            running_var[c] = (1.0 - momentum) * running_var[c] + momentum * var * count / (count - 1)
    else:
        mean = np.float64(running_mean[c])
        var = np.float64(running_var[c])
    invstd = 1.0 / math.sqrt(var + eps)
    save_mean[c] = mean
    save_invstd[c] = invstd
    scale = (np.float64(weight[c]) if weight.size else 1.0) * invstd
    return scale, (np.float64(bias[c]) if bias.size else 0.0) - mean * scale


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY, reduction=True)
def batch_norm_forward(x, weight, bias, running_mean, running_var, training, momentum, eps, n_tasks,
                       out, save_mean, save_invstd):
    """Batch norm of (N, C, S) ``x`` per channel, with batch statistics (``training``, updating
    non-empty running arrays; needs N*S > 1) or the running ones. ``n_tasks``: see
    :meth:`zgrad.kernels._jit.ParallelKernel.task_count`."""
    batch, channels, size = x.shape
    count = batch * size
    if size >= SHORT_RUN:
        for c in prange(channels):
            shift = np.float64(x[0, c, 0])
            total, squares = 0.0, 0.0
            if training:
                for n in range(batch):
                    t, s = shifted_sums(x[n, c], shift)
                    total += t
                    squares += s
            scale, offset = _output_constants(c, total, squares, shift, count, training, running_mean, running_var,
                                              momentum, eps, weight, bias, save_mean, save_invstd)
            for n in range(batch):
                affine(x[n, c], scale, offset, out[n, c])
    else:
        n_tasks = max(1, min(batch, n_tasks))
        shifts = np.empty(channels)
        for c in range(channels):
            shifts[c] = x[0, c, 0]
        totals = np.zeros((n_tasks, channels))
        squares = np.zeros((n_tasks, channels))
        if training:
            for task in prange(n_tasks):
                task_totals, task_squares = totals[task], squares[task]
                for n in range(task * batch // n_tasks, (task + 1) * batch // n_tasks):
                    for s in range(size):
                        for c in range(channels):
                            d = np.float64(x[n, c, s]) - shifts[c]
                            task_totals[c] += d
                            task_squares[c] += d * d
        scales = np.empty(channels, out.dtype)
        offsets = np.empty(channels, out.dtype)
        for c in range(channels):
            total, square = 0.0, 0.0
            for task in range(n_tasks):
                total += totals[task, c]
                square += squares[task, c]
            scales[c], offsets[c] = _output_constants(c, total, square, shifts[c], count, training, running_mean,
                                                      running_var, momentum, eps, weight, bias, save_mean, save_invstd)
        for n in prange(batch):
            for s in range(size):
                for c in range(channels):
                    out[n, c, s] = x[n, c, s] * scales[c] + offsets[c]


@kernel
def _grad_constants(c, total, dot, count, training, weight, save_invstd, grad_weight, grad_bias):
    """Channel c's weight and bias gradients, and (mean_grad, k, scale) of
    dx = (dy - mean_grad - (x - mean) * k) * scale."""
    invstd = np.float64(save_invstd[c])
    if grad_weight.size:
        grad_weight[c] = dot * invstd
    if grad_bias.size:
        grad_bias[c] = total
    scale = (np.float64(weight[c]) if weight.size else 1.0) * invstd
    if not training:
        return 0.0, 0.0, scale
    return total / count, dot / count * invstd * invstd, scale


@kernel
def _normalized_grad(grad, values, mean, mean_grad, k, scale, out):
    """out = (grad - mean_grad - (values - mean) * k) * scale, in the data's dtype."""
    t = out.dtype.type
    mean_, mean_grad_, k_, scale_ = t(mean), t(mean_grad), t(k), t(scale)
    for j in range(values.size):
        out[j] = (grad[j] - mean_grad_ - (values[j] - mean_) * k_) * scale_


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY, reduction=True)
def batch_norm_backward(grad, x, weight, save_mean, save_invstd, training, n_tasks, grad_x, grad_weight, grad_bias):
    """Gradients of :func:`batch_norm_forward`; empty ``grad_*`` outputs are skipped.

    With batch statistics (``training``) the mean and variance depend on ``x``:
    dx = (dy - mean(dy) - (x - mean) * invstd**2 * mean(dy * (x - mean))) * invstd * weight.
    With running statistics dx = dy * invstd * weight.
    """
    batch, channels, size = x.shape
    count = batch * size
    if size >= SHORT_RUN:
        for c in prange(channels):
            mean = np.float64(save_mean[c])
            total, dot = 0.0, 0.0
            for n in range(batch):
                t, d = grad_sums(grad[n, c], x[n, c], mean)
                total += t
                dot += d
            mean_grad, k, scale = _grad_constants(c, total, dot, count, training, weight, save_invstd, grad_weight,
                                                  grad_bias)
            if grad_x.size:
                for n in range(batch):
                    _normalized_grad(grad[n, c], x[n, c], mean, mean_grad, k, scale, grad_x[n, c])
    else:
        n_tasks = max(1, min(batch, n_tasks))
        totals = np.zeros((n_tasks, channels))
        dots = np.zeros((n_tasks, channels))
        for task in prange(n_tasks):
            task_totals, task_dots = totals[task], dots[task]
            for n in range(task * batch // n_tasks, (task + 1) * batch // n_tasks):
                for s in range(size):
                    for c in range(channels):
                        dy = np.float64(grad[n, c, s])
                        task_totals[c] += dy
                        task_dots[c] += dy * (np.float64(x[n, c, s]) - save_mean[c])
        means = np.empty(channels, x.dtype)
        mean_grads = np.empty(channels, x.dtype)
        ks = np.empty(channels, x.dtype)
        scales = np.empty(channels, x.dtype)
        for c in range(channels):
            total, dot = 0.0, 0.0
            for task in range(n_tasks):
                total += totals[task, c]
                dot += dots[task, c]
            mean_grads[c], ks[c], scales[c] = _grad_constants(c, total, dot, count, training, weight, save_invstd,
                                                              grad_weight, grad_bias)
            means[c] = save_mean[c]
        if grad_x.size:
            for n in prange(batch):
                for s in range(size):
                    for c in range(channels):
                        grad_x[n, c, s] = (grad[n, c, s] - mean_grads[c] - (x[n, c, s] - means[c]) * ks[c]) * scales[c]
