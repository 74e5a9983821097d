"""CUDA kernels of the dense linear algebra and the fused optimizer updates.

``matmul`` is a classic shared-memory tiled product over (batch, M, K) @ (batch, K, N): each
block loads a TILE x TILE tile of each operand per step of K, so every element read from global
memory is used TILE times. Blocks stride over the output's tiles, so a small grid covers any
size. A tuned Numba kernel of this kind reaches roughly 20-40% of cuBLAS's float32 throughput on
large square products (no register tiling, no tensor cores); cuBLAS is not in reach from Numba.
TILE is 16 on a GPU and 4 in the simulator, where each CUDA thread is a Python thread.

The optimizer kernels follow :mod:`zgrad.kernels.cpu_optim` (PyTorch's order of operations, every
step in the parameter's dtype, hyper-parameters rounded to it by the host). Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda_k_common import SIMULATOR, kernel, math

__all__ = ["TILE", "matmul", "sgd_step", "adam_step"]

TILE = 4 if SIMULATOR else 16


@kernel
def matmul(a, b, out):
    """out[z] = a[z] @ b[z] for 3-D views (batch broadcast by zero strides); block TILE x TILE."""
    tile_a = cuda.shared.array((TILE, TILE), out.dtype)
    tile_b = cuda.shared.array((TILE, TILE), out.dtype)
    T = out.dtype.type
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    batch, m, n = out.shape
    depth = a.shape[2]
    tiles_m = (m + TILE - 1) // TILE
    tiles_n = (n + TILE - 1) // TILE
    per_matrix = tiles_m * tiles_n
    for tile in range(cuda.blockIdx.x, batch * per_matrix, cuda.gridDim.x):
        z, within = tile // per_matrix, tile % per_matrix
        row = (within // tiles_n) * TILE + ty
        col = (within % tiles_n) * TILE + tx
        acc = T(0)
        for k0 in range(0, depth, TILE):
            tile_a[ty, tx] = a[z, row, k0 + tx] if (row < m and k0 + tx < depth) else T(0)
            tile_b[ty, tx] = b[z, k0 + ty, col] if (k0 + ty < depth and col < n) else T(0)
            cuda.syncthreads()
            for k in range(TILE):
                acc += tile_a[ty, k] * tile_b[k, tx]
            cuda.syncthreads()
        if row < m and col < n:
            out[z, row, col] = acc


@kernel
def sgd_step(param, grad, momentum_buf, lr, momentum, keep, weight_decay, nesterov, first_step):
    """One SGD step on flat ``param`` in place (see :func:`zgrad.kernels.cpu_optim.sgd_step`);
    ``keep`` = 1 - dampening; every scalar already in param's dtype."""
    T = param.dtype.type
    use_momentum = momentum != T(0)
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        d_p = grad[i]
        if weight_decay != T(0):
            d_p = d_p + weight_decay * param[i]
        if use_momentum:
            buf = d_p if first_step else momentum_buf[i] * momentum + keep * d_p
            momentum_buf[i] = buf
            d_p = d_p + momentum * buf if nesterov else buf
        param[i] = param[i] - lr * d_p


@kernel
def adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, weight, small_weight, beta2, step_size,
              bias_correction2_sqrt, eps, weight_decay, amsgrad):
    """One Adam step on flat ``param`` and its state in place (see
    :func:`zgrad.kernels.cpu_optim.adam_step`); scalars bias-corrected and in param's dtype."""
    T = param.dtype.type
    one_minus_weight = T(1) - weight
    one_minus_beta2 = T(1) - beta2
    for i in range(cuda.grid(1), param.size, cuda.gridsize(1)):
        g = grad[i]
        if weight_decay != T(0):
            g = g + weight_decay * param[i]
        m = exp_avg[i]
        m = m + weight * (g - m) if small_weight else g - (g - m) * one_minus_weight
        exp_avg[i] = m
        v = exp_avg_sq[i] * beta2 + one_minus_beta2 * g * g
        exp_avg_sq[i] = v
        if amsgrad:
            v_max = max_exp_avg_sq[i]
            if v > v_max or v != v:
                v_max = v
            max_exp_avg_sq[i] = v_max
            v = v_max
        denom = math.sqrt(v) / bias_correction2_sqrt + eps
        param[i] = param[i] - step_size * m / denom


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    cases = []
    b = types.boolean
    for dt in (types.float32, types.float64):
        v, t3 = dt[::1], dt[:, :, :]
        cases += [
            ("matmul", matmul.py_func, (t3, t3, t3)),
            ("sgd_step", sgd_step.py_func, (v, v, v, dt, dt, dt, dt, b, b)),
            ("adam_step", adam_step.py_func, (v, v, v, v, v, dt, b, dt, dt, dt, dt, dt, b)),
        ]
    return cases
