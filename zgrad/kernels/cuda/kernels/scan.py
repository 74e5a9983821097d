"""CUDA kernels of the running reductions and order statistics along the rows of C-contiguous
(R, C) arrays: running max/min with indices, the gradient of a running product, running
logsumexp and its gradient, a stable bitonic sort and the mode of sorted rows.

A scan is sequential along its row, so each runs one thread per row (grid-stride over the rows);
the sort is a bitonic network over the rows padded to a power of two, one launch per step (one
thread per compare-exchange), so a single long row sorts on the whole device. Same results as :mod:`zgrad.kernels.cpu.kernels.scan`. Kernels only: the host
side is :mod:`zgrad.kernels.cuda.scans`.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel, math

__all__ = ["cumextreme", "cumprod_backward", "logcumsumexp", "logcumsumexp_backward", "iota_rows", "bitonic_step", "mode"]

LOG_2 = 0.6931471805599453


@kernel
def cumextreme(x, largest, values_out, indices_out):
    """values_out[r, j] = the max (``largest``) or min of x[r, :j + 1], indices_out[r, j] its
    index: the latest on ties, and a NaN once one is seen."""
    c = x.shape[1]
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        best = x[r, 0]
        at = 0
        for j in range(c):
            v = x[r, j]
            if v != v or (best == best and (v >= best if largest else v <= best)):
                best = v
                at = j
            values_out[r, j] = best
            indices_out[r, j] = at


@kernel
def cumprod_backward(x, grad, out):
    """out[r, i] = the product of x[r, :i] times s[i], s[i] = grad[r, i] + x[r, i + 1] s[i + 1]:
    the gradient of a running product without a division."""
    T = out.dtype.type
    c = x.shape[1]
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        following = T(0)
        for j in range(c - 1, -1, -1):
            if j + 1 < c:
                following = x[r, j + 1] * following
            following = grad[r, j] + following
            out[r, j] = following
        before = T(1)
        for j in range(c):
            out[r, j] = out[r, j] * before
            before = before * x[r, j]


@kernel
def logcumsumexp(x, out):
    """out[r, j] = log(sum(exp(x[r, :j + 1]))), one log-add-exp per step."""
    T = out.dtype.type
    c = x.shape[1]
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        total = -T(math.inf)
        for j in range(c):
            v = x[r, j]
            high = max(total, v)
            low = min(total, v)
            if v != v or total != total:
                total = v + total
            elif high == low:
                total = high + T(LOG_2)
            else:
                total = high + math.log1p(math.exp(low - high))
            out[r, j] = total


@kernel
def logcumsumexp_backward(grad, x, result, out):
    """out[r, j] = exp(x[r, j] - result[r, j]) s[j], s[j] = grad[r, j] + exp(result[r, j] -
    result[r, j + 1]) s[j + 1]: every exponent <= 0."""
    T = out.dtype.type
    c = x.shape[1]
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        following = T(0)
        for j in range(c - 1, -1, -1):
            if j + 1 < c and result[r, j] != result[r, j + 1]:
                following = following * math.exp(result[r, j] - result[r, j + 1])
            following = following + grad[r, j]
            out[r, j] = T(0) if x[r, j] == -T(math.inf) else math.exp(x[r, j] - result[r, j]) * following


@device
def _before(w, k, v, j):
    """Whether the element (value w, index k) sorts before (v, j): ascending, NaNs last, ties by index."""
    if w != w:
        return v != v and k < j
    if v != v:
        return True
    return w < v or (w == v and k < j)


@device
def _sorts_after(x, r, a, b):
    """Whether column a of row r sorts after column b: columns past the row (padding) last, then
    :func:`_before`'s order."""
    c = x.shape[1]
    if a >= c or b >= c:
        return a >= c and (b < c or a > b)
    return _before(x[r, b], b, x[r, a], a)


@kernel
def iota_rows(order):
    """order[r, j] = j."""
    width = order.shape[1]
    for e in range(cuda.grid(1), order.size, cuda.gridsize(1)):
        r = e // width
        order[r, e - r * width] = e - r * width


@kernel
def bitonic_step(x, order, block, stride):
    """One compare-exchange step of a bitonic sort of the columns ``order`` (R, P, P a power of
    two) of each row of ``x``: the pairs ``stride`` apart, ascending within even ``block``-sized
    blocks and descending within odd ones. Steps for block 2, 4, ..., P, each with strides
    block / 2, ..., 1, sort every row (NaNs last, ties by column, padding columns >= C last)."""
    half = order.shape[1] // 2
    for e in range(cuda.grid(1), order.shape[0] * half, cuda.gridsize(1)):
        r = e // half
        i = e - r * half
        low = (i // stride) * 2 * stride + i % stride
        high = low + stride
        a = order[r, low]
        b = order[r, high]
        if _sorts_after(x, r, a, b) if (low & block) == 0 else _sorts_after(x, r, b, a):
            order[r, low] = b
            order[r, high] = a


@kernel
def mode(sorted_values, sorted_indices, values_out, indices_out):
    """values_out[r] = the most frequent value of the ascending row (the smallest of those equally
    frequent), indices_out[r] its last index in the unsorted row."""
    c = sorted_values.shape[1]
    for r in range(cuda.grid(1), sorted_values.shape[0], cuda.gridsize(1)):
        best_count = 0
        run = 0
        for j in range(c):
            run = run + 1 if j > 0 and sorted_values[r, j] == sorted_values[r, j - 1] else 1
            if run > best_count:
                best_count = run
                values_out[r] = sorted_values[r, j]
                indices_out[r] = sorted_indices[r, j]


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here: the floating ones for float32
    and float64, the sort, running max/min and mode also for the integer dtypes and bool."""
    from numba import types

    i64 = types.int64
    idx, idx2 = i64[::1], i64[:, ::1]
    cases = []
    for dt in (types.float32, types.float64):
        m = dt[:, ::1]
        cases += [
            ("cumprod_backward", cumprod_backward.py_func, (m, m, m)),
            ("logcumsumexp", logcumsumexp.py_func, (m, m)),
            ("logcumsumexp_backward", logcumsumexp_backward.py_func, (m, m, m, m)),
        ]
    cases.append(("iota_rows", iota_rows.py_func, (idx2,)))
    for dt in (types.float32, types.float64, types.boolean, types.uint8, types.int8, types.int16, types.int32, i64):
        m = dt[:, ::1]
        cases += [
            ("cumextreme", cumextreme.py_func, (m, types.boolean, m, idx2)),
            ("bitonic_step", bitonic_step.py_func, (m, idx2, i64, i64)),
            ("mode", mode.py_func, (m, idx2, dt[::1], idx)),
        ]
    return cases
