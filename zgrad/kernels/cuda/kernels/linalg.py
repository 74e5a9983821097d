"""CUDA kernels of the dense linear algebra.

``matmul`` is a classic shared-memory tiled product over (batch, M, K) @ (batch, K, N): each
block loads a TILE x TILE tile of each operand per step of K, so every element read from global
memory is used TILE times. Blocks stride over the output's tiles, so a small grid covers any
size. It runs where cuBLAS does not (:mod:`zgrad.kernels.cuda.cublas`: the simulator, no library,
integer dtypes), at about a ninth of cuBLAS's float32 speed (no register tiling, no tensor cores).
TILE is 16 on a GPU and 4 in the simulator, where each CUDA thread is a Python thread.
Kernels only: the host side is :func:`zgrad.kernels.cuda.reduce.matmul`.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import SIMULATOR, kernel

__all__ = ["TILE", "matmul"]

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


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    cases = []
    for dt in (types.float32, types.float64):
        t3 = dt[:, :, :]
        cases.append(("matmul", matmul.py_func, (t3, t3, t3)))
    return cases
