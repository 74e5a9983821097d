"""CUDA kernels of layer normalization over the ``rows`` rows of ``n`` elements of a C-contiguous
array: the forward and the input gradient a warp per row where a warp holds the row
(``rows.WARP_ROW_PER_LANE`` elements a lane), else one block per row, the weight and bias
gradients' partial sums over chunks of rows (then summed by ``rows.column_reduce``). Host side: the
layer-norm case of :func:`zgrad.kernels.cuda.layers.group_norm` and its backward. Every array
arrives flat (the allocation's own array: no strided wrapper per launch); ``weight`` and ``bias``
are (n,) arrays, or empty (0,) ones for none. Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import kernel, math
from zgrad.kernels.cuda.kernels.rows import (
    MAX_BLOCK,
    WARP_ROW_PER_LANE,
    block_sum,
    chunk_of_rows,
    warp_rows,
    warp_sum,
)

__all__ = ["layer_norm_backward_rows", "layer_norm_backward_warp_rows", "layer_norm_parameter_partials",
           "layer_norm_rows", "layer_norm_warp_rows"]


@kernel
def layer_norm_rows(x, rows, n, weight, bias, eps, out, mean, invstd):
    """Row r of out = (row r of x - mean[r]) * invstd[r] * weight + bias, with mean[r] and
    invstd[r] = 1 / sqrt(var + eps) of the row (two passes; the biased variance) saved."""
    buf = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    t, step = cuda.threadIdx.x, cuda.blockDim.x
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * n
        acc = T(0)
        for j in range(t, n, step):
            acc += x[row + j]
        m = block_sum(buf, acc) / T(n)
        acc = T(0)
        for j in range(t, n, step):
            d = x[row + j] - m
            acc += d * d
        s = T(1) / math.sqrt(block_sum(buf, acc) / T(n) + eps)
        for j in range(t, n, step):
            y = (x[row + j] - m) * s
            if weight.size:
                y *= weight[j]
            if bias.size:
                y += bias[j]
            out[row + j] = y
        if t == 0:
            mean[r] = m
            invstd[r] = s


@kernel
def layer_norm_backward_rows(grad, x, rows, n, weight, mean, invstd, grad_x):
    """Row r of grad_x = (d - xhat * mean(d * xhat) - mean(d)) * invstd[r] with xhat the
    normalized row and d = row r of grad * weight."""
    buf = cuda.shared.array(MAX_BLOCK, grad_x.dtype)
    T = grad_x.dtype.type
    t, step = cuda.threadIdx.x, cuda.blockDim.x
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        row = r * n
        m, s = mean[r], invstd[r]
        acc_d, acc_dx = T(0), T(0)
        for j in range(t, n, step):
            d = grad[row + j] * weight[j] if weight.size else grad[row + j]
            acc_d += d
            acc_dx += d * (x[row + j] - m) * s
        mean_d = block_sum(buf, acc_d) / T(n)
        mean_dx = block_sum(buf, acc_dx) / T(n)
        for j in range(t, n, step):
            d = grad[row + j] * weight[j] if weight.size else grad[row + j]
            grad_x[row + j] = (d - (x[row + j] - m) * s * mean_dx - mean_d) * s


@kernel
def layer_norm_warp_rows(x, rows, n, weight, bias, eps, out, mean, invstd):
    """:func:`layer_norm_rows` a warp per row, the row held in the lanes' registers (one read of
    x; the mean and variance summed by shuffles). The block's warps step through the rows
    together (spare warps in the last group compute nothing but take part)."""
    held = cuda.local.array(WARP_ROW_PER_LANE, out.dtype)
    T = out.dtype.type
    lanes, lane, first, end, step = warp_rows(rows)
    for r in range(first, end, step):
        live = r < rows
        row = r * n + lane
        acc = T(0)
        for k in range(WARP_ROW_PER_LANE):
            v = T(x[row + k * lanes]) if live and lane + k * lanes < n else T(0)
            held[k] = v
            acc += v
        m = warp_sum(acc, lanes) / T(n)
        acc = T(0)
        for k in range(WARP_ROW_PER_LANE):
            if lane + k * lanes < n:
                d = held[k] - m
                acc += d * d
        s = T(1) / math.sqrt(warp_sum(acc, lanes) / T(n) + eps)
        if live:
            for k in range(WARP_ROW_PER_LANE):
                j = lane + k * lanes
                if j < n:
                    y = (held[k] - m) * s
                    if weight.size:
                        y *= weight[j]
                    if bias.size:
                        y += bias[j]
                    out[row + k * lanes] = y
            if lane == 0:
                mean[r] = m
                invstd[r] = s


@kernel
def layer_norm_backward_warp_rows(grad, x, rows, n, weight, mean, invstd, grad_x):
    """:func:`layer_norm_backward_rows` a warp per row: grad * weight and the normalized row held
    in the lanes' registers (one read of grad and x), their means summed by shuffles."""
    held_d = cuda.local.array(WARP_ROW_PER_LANE, grad_x.dtype)
    held_xhat = cuda.local.array(WARP_ROW_PER_LANE, grad_x.dtype)
    T = grad_x.dtype.type
    lanes, lane, first, end, step = warp_rows(rows)
    for r in range(first, end, step):
        live = r < rows
        row = r * n + lane
        m, s = (mean[r], invstd[r]) if live else (T(0), T(0))
        acc_d, acc_dx = T(0), T(0)
        for k in range(WARP_ROW_PER_LANE):
            j = lane + k * lanes
            if live and j < n:
                d = grad[row + k * lanes] * weight[j] if weight.size else grad[row + k * lanes]
                xhat = (x[row + k * lanes] - m) * s
                held_d[k] = d
                held_xhat[k] = xhat
                acc_d += d
                acc_dx += d * xhat
        mean_d = warp_sum(acc_d, lanes) / T(n)
        mean_dx = warp_sum(acc_dx, lanes) / T(n)
        if live:
            for k in range(WARP_ROW_PER_LANE):
                if lane + k * lanes < n:
                    grad_x[row + k * lanes] = (held_d[k] - held_xhat[k] * mean_dx - mean_d) * s


@kernel
def layer_norm_parameter_partials(grad, x, rows, n, mean, invstd, weight_parts, bias_parts):
    """Element j of row p of weight_parts = the sum of grad * xhat at column j over the rows of
    chunk p, and of bias_parts that of grad (the rows split into weight_parts.size // n chunks);
    grid y walks the chunks, grid x and threads the columns."""
    T = weight_parts.dtype.type
    chunks = weight_parts.size // n
    for p in range(cuda.blockIdx.y, chunks, cuda.gridDim.y):
        start, end = chunk_of_rows(p, rows, chunks)
        for j in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, n, cuda.gridDim.x * cuda.blockDim.x):
            acc_w, acc_b = T(0), T(0)
            for r in range(start, end):
                g = grad[r * n + j]
                acc_w += g * (x[r * n + j] - mean[r]) * invstd[r]
                acc_b += g
            weight_parts[p * n + j] = acc_w
            bias_parts[p * n + j] = acc_b


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    cases = []
    i64 = types.int64
    for dt in (types.float32, types.float64):
        v = dt[::1]
        cases += [
            ("layer_norm_rows", layer_norm_rows.py_func, (v, i64, i64, v, v, dt, v, v, v)),
            ("layer_norm_backward_rows", layer_norm_backward_rows.py_func, (v, v, i64, i64, v, v, v, v)),
            ("layer_norm_parameter_partials", layer_norm_parameter_partials.py_func, (v, v, i64, i64, v, v, v, v)),
            ("layer_norm_warp_rows", layer_norm_warp_rows.py_func, (v, i64, i64, v, v, dt, v, v, v)),
            ("layer_norm_backward_warp_rows", layer_norm_backward_warp_rows.py_func, (v, v, i64, i64, v, v, v, v)),
        ]
    return cases
