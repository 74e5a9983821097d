"""The CUDA backend's attention (host side of :mod:`kernels.attention`; part of
:mod:`zgrad.kernels.cuda.backend`). The mask goes to the kernels as a broadcast view; no mask as
an empty (1, 1, 1, 0) array.

Where cuBLAS runs the products (a GPU with the library), attention is computed as matrix
products: the scores q k^T of a chunk of key/value heads by one batched GEMM, their softmax,
masks and dropout by a row kernel, the output by a second GEMM; the backward recomputes the
weights from the saved log-sum-exp (nothing of size L x S is kept between the passes) and takes
dV, dQ and dK as GEMMs over the score gradients. The G query heads that share a key/value head
are one GEMM's rows (q's (B, Hq, L, E) memory read as (B * Hk, G * L, E)), so grouped-query
attention needs no copies, and dK and dV sum over the group inside the product. Chunks bound
the scores' memory to :data:`SCORE_CHUNK_BYTES` (two such buffers in the backward). Elsewhere
(Numba's simulator, no cuBLAS) the fused kernels run: one thread per query or key row.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cuda import cublas, kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.reduce import contiguous, launch_rows, launch_short_rows, matmul, warp_rows_launch
from zgrad.kernels.promotion import FULL_FLOAT_DTYPES

__all__ = ["SCORE_CHUNK_BYTES", "attention", "attention_backward"]

SCORE_CHUNK_BYTES = 256 << 20


def _full_mask(mask: DeviceArray | None, shape: tuple[int, ...], dtype: np.dtype) -> DeviceArray:
    return DeviceArray.empty((1, 1, 1, 0), dtype) if mask is None else mask.broadcast_to(shape)


def _launch(kernel, count: int, *args) -> None:
    if count:
        rt.launch(kernel, rt.grid_1d(count), *(a.arg() if isinstance(a, DeviceArray) else a for a in args))


def _by_products(q: DeviceArray) -> bool:
    return q.dtype in FULL_FLOAT_DTYPES and cublas.available()


def _head_chunks(q: DeviceArray, k: DeviceArray) -> list[tuple[int, int]]:
    """[z0, z1) ranges of the B * Hk key/value heads whose scores fit in SCORE_CHUNK_BYTES
    (at least one head each)."""
    heads = k.shape[0] * k.shape[1]
    per_head = q.shape[1] // k.shape[1] * q.shape[2] * k.shape[2] * q.itemsize
    step = max(1, SCORE_CHUNK_BYTES // max(per_head, 1))
    return [(z0, min(z0 + step, heads)) for z0 in range(0, heads, step)]


def _grouped(a: DeviceArray, kv_heads: int) -> DeviceArray:
    """A C-contiguous (B, H, N, C) array as (B * Hk, H / Hk * N, C): each key/value head's rows."""
    return a.reshape(a.shape[0] * kv_heads, -1, a.shape[3])


def _scores(qz: DeviceArray, kz: DeviceArray, z0: int, z1: int) -> DeviceArray:
    """The raw products q k^T of key/value heads z0 .. z1 - 1, (z1 - z0, G * L, S)."""
    scores = DeviceArray.empty((z1 - z0, qz.shape[1], kz.shape[1]), qz.dtype)
    return matmul(qz[z0:z1], kz[z0:z1].transpose(0, 2, 1), scores)


def attention(q, k, v, mask, scale, causal, seed, threshold, dropout_scale, out, lse):
    """out and lse of softmax(q k^T * scale + mask) v (see :mod:`kernels.attention`)."""
    q, k, v = contiguous(q), contiguous(k), contiguous(v)
    full = _full_mask(mask, (*q.shape[:-1], k.shape[-2]), q.dtype)
    typed = q.dtype.type  # scalars in the data's dtype: a float32 kernel computes in float32
    options = (typed(scale), bool(causal), int(seed), int(threshold), typed(dropout_scale))
    if not _by_products(q):
        _launch(kernels.attention.attention_forward, lse.size, q, k, v, full, *options, out, lse)
        return out, lse
    kv_heads = k.shape[1]
    qz, kz, vz = _grouped(q, kv_heads), _grouped(k, kv_heads), _grouped(v, kv_heads)
    target = out if out.flags.c_contiguous else DeviceArray.empty(out.shape, out.dtype)
    outz = _grouped(target, kv_heads)
    for z0, z1 in _head_chunks(q, k):
        weights = _scores(qz, kz, z0, z1)
        launch_short_rows(kernels.attention.attention_weights_warp_rows, kernels.attention.attention_weights,
                          weights.shape[0] * weights.shape[1], weights.shape[2], weights, full, *options, kv_heads, z0,
                          lse)
        matmul(weights, vz[z0:z1], outz[z0:z1])
    if target is not out:
        out[...] = target
    return out, lse


def attention_backward(grad, q, k, v, mask, out, lse, scale, causal, seed, threshold, dropout_scale, grad_q, grad_k,
                       grad_v, grad_mask):
    """Gradients of :func:`attention` into grad_q, grad_k, grad_v and, unless None, grad_mask."""
    q, k, v, grad = contiguous(q), contiguous(k), contiguous(v), contiguous(grad)
    full = _full_mask(mask, (*q.shape[:-1], k.shape[-2]), q.dtype)
    typed = q.dtype.type
    options = (typed(scale), bool(causal), int(seed), int(threshold), typed(dropout_scale))
    deltas = DeviceArray.empty(lse.shape, q.dtype)
    mask_grad = DeviceArray.empty((1, 1, 1, 0), q.dtype) if grad_mask is None else grad_mask
    if not _by_products(q):
        _launch(kernels.attention.attention_backward_queries, lse.size, q, k, v, full, *options, out, grad, lse,
                deltas, grad_q, mask_grad)
        _launch(kernels.attention.attention_backward_keys, k.shape[0] * k.shape[1] * k.shape[2], q, k, v, full,
                *options, grad, lse, deltas, grad_k, grad_v)
        return grad_q, grad_k, grad_v, grad_mask
    if lse.size:
        rt.launch(kernels.attention.attention_deltas, warp_rows_launch(lse.size, 0), grad.reshape(lse.size, -1).arg(),
                  contiguous(out).reshape(lse.size, -1).arg(), deltas.reshape(-1).arg())
    kv_heads = k.shape[1]
    qz, kz, vz, gz = _grouped(q, kv_heads), _grouped(k, kv_heads), _grouped(v, kv_heads), _grouped(grad, kv_heads)
    dqz, dkz, dvz = _grouped(grad_q, kv_heads), _grouped(grad_k, kv_heads), _grouped(grad_v, kv_heads)
    for z0, z1 in _head_chunks(q, k):
        weights = _scores(qz, kz, z0, z1)
        score_grads = matmul(gz[z0:z1], vz[z0:z1].transpose(0, 2, 1), DeviceArray.empty(weights.shape, q.dtype))
        launch_rows(kernels.attention.attention_score_gradients, weights.shape[0] * weights.shape[1], weights,
                    score_grads, full, *options, kv_heads, z0, lse, deltas, mask_grad)
        matmul(weights.transpose(0, 2, 1), gz[z0:z1], dvz[z0:z1])
        matmul(score_grads, kz[z0:z1], dqz[z0:z1])
        matmul(score_grads.transpose(0, 2, 1), qz[z0:z1], dkz[z0:z1])
    return grad_q, grad_k, grad_v, grad_mask
