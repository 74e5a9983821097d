"""Numba CPU kernels of the running reductions and order statistics: running sums and products,
running max/min with their indices, the gradient of a running product, running logsumexp and its gradient, and the mode of
sorted rows.

Row kernels take 2-D (N, C) C-contiguous arrays and scan or reduce each row (the caller moves the
scanned dimension last). Running max/min and the mode take any real dtype; the rest float32 or
float64, computed in that dtype.
"""

from __future__ import annotations

import math

from numba import prange

from zgrad.kernels._jit import PARALLEL_MIN_SIZE_HEAVY, parallel_kernel

__all__ = ["cumextreme", "cumprod_backward", "logcumsumexp", "logcumsumexp_backward", "mode", "running_rows"]


@parallel_kernel()
def running_rows(x, product, reverse, out):
    """out[r] = the running sums (``product``: products) of row x[r], accumulated in out's dtype,
    from the row's end when ``reverse``. Four rows advance together: a row's chain of additions
    waits on each one's latency, four independent chains overlap."""
    n, c = x.shape
    start = out.dtype.type(1) if product else out.dtype.type(0)
    for block in prange((n + 3) // 4):
        r = block * 4
        if r + 4 <= n:
            a0 = a1 = a2 = a3 = start
            for k in range(c):
                j = c - 1 - k if reverse else k
                if product:
                    a0 *= x[r, j]
                    a1 *= x[r + 1, j]
                    a2 *= x[r + 2, j]
                    a3 *= x[r + 3, j]
                else:
                    a0 += x[r, j]
                    a1 += x[r + 1, j]
                    a2 += x[r + 2, j]
                    a3 += x[r + 3, j]
                out[r, j] = a0
                out[r + 1, j] = a1
                out[r + 2, j] = a2
                out[r + 3, j] = a3
        else:
            for row in range(r, n):
                a = start
                for k in range(c):
                    j = c - 1 - k if reverse else k
                    a = a * x[row, j] if product else a + x[row, j]
                    out[row, j] = a


@parallel_kernel()
def cumextreme(x, largest, values_out, indices_out):
    """values_out[r, j] = the max (``largest``) or min of x[r, :j + 1], indices_out[r, j] its
    index: the latest on ties, and NaN once one is seen, with the latest NaN's index (PyTorch's
    cummax/cummin). Branch-free: each step selects, so no misprediction stalls the chain."""
    n, c = x.shape
    if c == 0:
        return
    for r in prange(n):
        best, at = x[r, 0], 0
        for j in range(c):
            v = x[r, j]
            # keep the best unless v ties or beats it, or is a NaN (a NaN best yields only to a NaN)
            keep = (v < best if largest else v > best) or (best != best and v == v)
            best = best if keep else v
            at = at if keep else j
            values_out[r, j] = best
            indices_out[r, j] = at


@parallel_kernel()
def cumprod_backward(x, grad, out):
    """out[r, i] = sum over j >= i of grad[r, j] * the product of x[r, k] for k <= j, k != i: the
    gradient of a running product, without a division so exact with zeros. It is the product of
    the elements before i times s[i], where s[i] = grad[r, i] + x[r, i + 1] * s[i + 1]."""
    n, c = x.shape
    for r in prange(n):
        following = out.dtype.type(0)
        for j in range(c - 1, -1, -1):
            following = grad[r, j] + (x[r, j + 1] * following if j + 1 < c else following)
            out[r, j] = following
        before = out.dtype.type(1)
        for j in range(c):
            out[r, j] *= before
            before *= x[r, j]


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def logcumsumexp(x, out):
    """out[r, j] = log(sum(exp(x[r, :j + 1]))), each step a log-add-exp of two terms (exact where
    an element is far below the running result)."""
    n, c = x.shape
    for r in prange(n):
        total = out.dtype.type(-math.inf)
        for j in range(c):
            v = x[r, j]
            high, low = max(total, v), min(total, v)
            if v != v or total != total:
                total = v + total
            elif high == low:
                total = high + math.log(2.0)
            else:
                total = high + math.log1p(math.exp(low - high))
            out[r, j] = total


@parallel_kernel(min_size=PARALLEL_MIN_SIZE_HEAVY)
def logcumsumexp_backward(grad, x, result, out):
    """out[r, j] = sum over i >= j of grad[r, i] * exp(x[r, j] - result[r, i]), as
    exp(x[r, j] - result[r, j]) * s[j] with s[j] = grad[r, j] + exp(result[r, j] - result[r, j + 1]) s[j + 1]:
    every exponent is <= 0 (the running result never decreases), so nothing overflows."""
    n, c = x.shape
    for r in prange(n):
        following = out.dtype.type(0)
        for j in range(c - 1, -1, -1):
            if j + 1 < c and result[r, j] != result[r, j + 1]:
                following *= math.exp(result[r, j] - result[r, j + 1])
            following += grad[r, j]
            out[r, j] = 0.0 if x[r, j] == -math.inf else math.exp(x[r, j] - result[r, j]) * following


@parallel_kernel()
def mode(sorted_values, sorted_indices, values_out, indices_out):
    """values_out[r] = the most frequent value of the ascending row sorted_values[r] (the smallest
    of those equally frequent), indices_out[r] = its last index in the unsorted row (the largest of
    its sorted_indices, a stable sort's last): PyTorch's mode."""
    n, c = sorted_values.shape
    for r in prange(n):  # within the winning run every step is a new best: the index ends at its last
        best_count, run = 0, 0
        for j in range(c):
            run = run + 1 if j and sorted_values[r, j] == sorted_values[r, j - 1] else 1
            if run > best_count:
                best_count = run
                values_out[r] = sorted_values[r, j]
                indices_out[r] = sorted_indices[r, j]
