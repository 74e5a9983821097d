"""Reduction Numba kernels of the tensor API: variance, logsumexp, vector norms, row extremes,
non-zero counts, and the gradients of a product and of a full max.

Row kernels take 2-D (N, C) C-contiguous arrays and reduce each row (the caller moves the reduced
dimensions last). Sums accumulate in float64; results are written in ``out``'s dtype.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from zgrad.kernels.cpu.kernels import vector_math
from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, parallel_kernel
from zgrad.kernels.cpu.kernels.rowwise import _row_max, _sum_exp_shifted

__all__ = [
    "count_nonzero", "count_nonzero_rows", "distribute_equal", "extreme_rows", "extremes_rows", "logsumexp_backward",
    "logsumexp_forward", "prod_backward", "sum_rows", "var_backward", "var_forward", "vector_norm",
]


@parallel_kernel(reduction=True)
def var_forward(x, correction, mean_out, var_out):
    """mean_out[r] = mean(x[r]); var_out[r] = sum((x[r] - mean)^2) / max(C - correction, 0).

    Two passes over each (cache-resident) row: exact where the one-pass sum-of-squares formula
    cancels catastrophically.
    """
    n, c = x.shape
    denominator = max(c - correction, 0.0)
    for r in prange(n):
        total = 0.0
        for j in range(c):
            total += x[r, j]
        mean = total / c
        squares = 0.0
        for j in range(c):
            diff = x[r, j] - mean
            squares += diff * diff
        mean_out[r] = mean
        var_out[r] = squares / denominator


@parallel_kernel()
def var_backward(x, mean, coef, out):
    """out[r, j] = coef[r] * (x[r, j] - mean[r]): the gradient of a row variance (coef = 2g/(C-c))
    or standard deviation (coef = g/(std (C-c)))."""
    n, c = x.shape
    for r in prange(n):
        m, k = mean[r], coef[r]
        for j in range(c):
            out[r, j] = k * (x[r, j] - m)


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def logsumexp_forward(x, out):
    """out[r] = log(sum(exp(x[r]))), max-shifted; +-inf rows give their infinite max."""
    for r in prange(x.shape[0]):
        peak = _row_max(x[r])
        if math.isinf(peak):
            out[r] = peak
        else:
            out[r] = math.log(_sum_exp_shifted(x[r], peak)) + peak


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def logsumexp_backward(grad, x, result, out):
    """out[r, j] = grad[r] * exp(x[r, j] - result[r]) (the softmax of the row, scaled)."""
    n, c = x.shape
    for r in prange(n):
        g, shift = grad[r], result[r]
        for j in range(c):
            out[r, j] = g * vector_math.exp(x[r, j] - shift)


@parallel_kernel(reduction=True)
def distribute_equal(x, value, grad, out):
    """Gradient of a full max/min: ``grad`` split evenly over the elements equal to ``value``
    (over the NaNs when ``value`` is NaN), 0 elsewhere, as PyTorch's evenly_distribute_backward."""
    nan_value = value != value
    count = 0
    for i in prange(x.size):
        if x[i] == value or (nan_value and x[i] != x[i]):
            count += 1
    share = out.dtype.type(grad / count)
    zero = out.dtype.type(0)
    for i in prange(x.size):
        out[i] = share if x[i] == value or (nan_value and x[i] != x[i]) else zero


@parallel_kernel()
def prod_backward(x, grad, out):
    """out[r, j] = grad[r] * the product of x[r, k] over every k != j: the running product from the
    left times the one from the right, without a division, so exact where the row holds one zero
    or several (PyTorch's prod_safe_zeros_backward)."""
    n, c = x.shape
    for r in prange(n):
        before = out.dtype.type(1)
        for j in range(c):
            out[r, j] = before
            before *= x[r, j]
        after = grad[r]
        for j in range(c - 1, -1, -1):
            out[r, j] *= after
            after *= x[r, j]


@parallel_kernel(reduction=True)
def vector_norm(x, order, out):
    """out[0] = the ``order``-norm of the 1-D ``x``, in one pass accumulated in float64: the largest
    (order inf) or smallest (-inf) absolute value, the count of non-zeros (0), else
    (sum |x|**order) ** (1 / order), with orders 1 and 2 computed without a power. A NaN gives NaN."""
    n = x.size
    nans = 0
    if order == math.inf:
        largest = 0.0
        for i in prange(n):
            value = abs(np.float64(x[i]))
            nans += 1 if value != value else 0
            largest = max(largest, value)
        out[0] = math.nan if nans else largest
        return
    if order == -math.inf:
        smallest = math.inf
        for i in prange(n):
            value = abs(np.float64(x[i]))
            nans += 1 if value != value else 0
            smallest = min(smallest, value)
        out[0] = math.nan if nans else smallest
        return
    total = 0.0
    if order == 2.0:
        for i in prange(n):
            value = np.float64(x[i])
            total += value * value
        out[0] = math.sqrt(total)
    elif order == 1.0:
        for i in prange(n):
            total += abs(np.float64(x[i]))
        out[0] = total
    elif order == 0.0:
        for i in prange(n):
            value = x[i]
            total += 1.0 if value != 0 else 0.0
        out[0] = total
    else:
        for i in prange(n):
            total += abs(np.float64(x[i])) ** order
        out[0] = total ** (1.0 / order)


@parallel_kernel(reduction=True)
def sum_rows(x, out):
    """out[r] = the sum of the float row x[r], accumulated in float64: for float32 rows as exact as
    numpy's pairwise sum (measured up to 2^24 elements), for float64 ones a few ulp from it. LLVM
    keeps the running sum in several vector lanes."""
    for r in prange(x.shape[0]):
        row = x[r]
        total = 0.0
        for j in range(row.size):
            total += np.float64(row[j])
        out[r] = total


@parallel_kernel(reduction="extremes")
def extreme_rows(x, largest, out):
    """out[r] = the max (``largest``) or min of the float row x[r] (C >= 1); NaN wins. The min is
    minus the max of the negated row; LLVM keeps the running max in several vector lanes."""
    sign = x.dtype.type(1) if largest else x.dtype.type(-1)
    for r in prange(x.shape[0]):
        row = x[r]
        m = sign * row[0]
        for j in range(row.size):
            m = vector_math.maximum(m, sign * row[j])
        out[r] = sign * m


@parallel_kernel(reduction="extremes")
def extremes_rows(x, smallest, largest):
    """smallest[r], largest[r] = the min and max of the float row x[r] (C >= 1), in one pass; NaN
    wins."""
    for r in prange(x.shape[0]):
        row = x[r]
        high, negated_low = row[0], -row[0]
        for j in range(row.size):
            high = vector_math.maximum(high, row[j])
            negated_low = vector_math.maximum(negated_low, -row[j])
        smallest[r], largest[r] = -negated_low, high


@parallel_kernel()
def count_nonzero(x, out):
    """out[0] = how many elements of the 1-D x are not zero (NaN counts)."""
    count = 0
    for i in prange(x.size):
        count += 1 if x[i] != 0 else 0
    out[0] = count


@parallel_kernel()
def count_nonzero_rows(x, out):
    """out[r] = how many elements of the row x[r] are not zero (NaN counts)."""
    for r in prange(x.shape[0]):
        count = 0
        for j in range(x.shape[1]):
            count += 1 if x[r, j] != 0 else 0
        out[r] = count
