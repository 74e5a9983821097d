"""CUDA kernels of layer normalization over the rows of a C-contiguous (R, C) array: the forward
and the input gradient one block per row, the weight and bias gradients' partial sums over chunks
of rows (then summed by ``rows.column_reduce``). Host side: the layer-norm case of
:func:`zgrad.kernels.cuda.layers.group_norm` and its backward. ``weight`` and ``bias`` are (C,)
arrays, or empty (0,) ones for none. Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import kernel, math
from zgrad.kernels.cuda.kernels.rows import MAX_BLOCK, block_sum, chunk_of_rows

__all__ = ["layer_norm_backward_rows", "layer_norm_parameter_partials", "layer_norm_rows"]


@kernel
def layer_norm_rows(x, weight, bias, eps, out, mean, invstd):
    """out[r] = (x[r] - mean[r]) * invstd[r] * weight + bias, with mean[r] and invstd[r] = 1 /
    sqrt(var + eps) of the row (two passes; the biased variance) saved."""
    buf = cuda.shared.array(MAX_BLOCK, out.dtype)
    T = out.dtype.type
    n, t, step = x.shape[1], cuda.threadIdx.x, cuda.blockDim.x
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        acc = T(0)
        for j in range(t, n, step):
            acc += x[r, j]
        m = block_sum(buf, acc) / T(n)
        acc = T(0)
        for j in range(t, n, step):
            d = x[r, j] - m
            acc += d * d
        s = T(1) / math.sqrt(block_sum(buf, acc) / T(n) + eps)
        for j in range(t, n, step):
            y = (x[r, j] - m) * s
            if weight.size:
                y *= weight[j]
            if bias.size:
                y += bias[j]
            out[r, j] = y
        if t == 0:
            mean[r] = m
            invstd[r] = s


@kernel
def layer_norm_backward_rows(grad, x, weight, mean, invstd, grad_x):
    """grad_x[r] = (d - xhat * mean(d * xhat) - mean(d)) * invstd[r] with xhat the normalized row
    and d = grad[r] * weight."""
    buf = cuda.shared.array(MAX_BLOCK, grad_x.dtype)
    T = grad_x.dtype.type
    n, t, step = x.shape[1], cuda.threadIdx.x, cuda.blockDim.x
    for r in range(cuda.blockIdx.x, x.shape[0], cuda.gridDim.x):
        m, s = mean[r], invstd[r]
        acc_d, acc_dx = T(0), T(0)
        for j in range(t, n, step):
            d = grad[r, j] * weight[j] if weight.size else grad[r, j]
            acc_d += d
            acc_dx += d * (x[r, j] - m) * s
        mean_d = block_sum(buf, acc_d) / T(n)
        mean_dx = block_sum(buf, acc_dx) / T(n)
        for j in range(t, n, step):
            d = grad[r, j] * weight[j] if weight.size else grad[r, j]
            grad_x[r, j] = (d - (x[r, j] - m) * s * mean_dx - mean_d) * s


@kernel
def layer_norm_parameter_partials(grad, x, mean, invstd, weight_parts, bias_parts):
    """weight_parts[p, j] = the sum of grad[r, j] * xhat[r, j] and bias_parts[p, j] that of
    grad[r, j] over the rows r of chunk p (the rows split into weight_parts.shape[0] chunks);
    grid y walks the chunks, grid x and threads the columns."""
    T = weight_parts.dtype.type
    n, chunks = x.shape[1], weight_parts.shape[0]
    for p in range(cuda.blockIdx.y, chunks, cuda.gridDim.y):
        start, end = chunk_of_rows(p, x.shape[0], chunks)
        for j in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, n, cuda.gridDim.x * cuda.blockDim.x):
            acc_w, acc_b = T(0), T(0)
            for r in range(start, end):
                g = grad[r, j]
                acc_w += g * (x[r, j] - mean[r]) * invstd[r]
                acc_b += g
            weight_parts[p, j] = acc_w
            bias_parts[p, j] = acc_b


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    cases = []
    for dt in (types.float32, types.float64):
        m, v = dt[:, ::1], dt[::1]
        cases += [
            ("layer_norm_rows", layer_norm_rows.py_func, (m, v, v, dt, m, v, v)),
            ("layer_norm_backward_rows", layer_norm_backward_rows.py_func, (m, m, v, v, v, m)),
            ("layer_norm_parameter_partials", layer_norm_parameter_partials.py_func, (m, m, v, v, m, m)),
        ]
    return cases
