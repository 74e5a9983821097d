"""CUDA kernels of fused scaled-dot-product attention (the CPU kernels' algorithm and layout, see
:mod:`zgrad.kernels.cpu.kernels.attention`; host side: :mod:`zgrad.kernels.cuda.attention`).

Forward: one thread per query row, two passes over its keys (never past the causal diagonal):
the row's maximum and sum of exponentials, then the weighted sum of values written into ``out``;
the row statistic ``lse`` is saved (+inf for a fully masked row, whose output is zero). Backward
in two launches, neither with atomics: one thread per query row (D = dO . out, saved in
``deltas``, and dQ), then one thread per key row (dK and dV over the query heads its key/value
head serves). Weights are recomputed from ``lse``; dropout regenerates the forward's mask with
:func:`zgrad.kernels.vocabulary.attention_keeps`. ``mask`` is a broadcast view of the additive
mask or, for none, an empty (1, 1, 1, 0) array. Kernels only.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel, math
from zgrad.kernels.vocabulary import attention_keeps

__all__ = ["attention_forward", "attention_backward_keys", "attention_backward_queries"]

_keeps = device(attention_keeps)


@device
def _score(q, k, mask, b, h, hk, i, j, scale, causal):
    """The masked, scaled score of query i and key j (-inf where masked out)."""
    T = q.dtype.type
    if causal and j > i:
        return T(-np.inf)
    s = T(0)
    for c in range(q.shape[3]):
        s += q[b, h, i, c] * k[b, hk, j, c]
    s *= scale
    if mask.shape[3]:
        s += mask[b, h, i, j]
    return s


@device
def _kept(seed, threshold, b, h, i, j, heads, length, keys):
    return threshold == 0 or _keeps(seed, ((b * heads + h) * length + i) * keys + j, threshold)


@device
def _dot(a, b, h, i, x, hx, j):
    """a[b, h, i, :] . x[b, hx, j, :]."""
    T = a.dtype.type
    s = T(0)
    for c in range(a.shape[3]):
        s += a[b, h, i, c] * x[b, hx, j, c]
    return s


@kernel
def attention_forward(q, k, v, mask, scale, causal, seed, threshold, dropout_scale, out, lse):
    """out, lse = softmax(q k^T * scale + mask) v with dropout, and each row's log-sum-exp."""
    T = out.dtype.type
    scale_, dropout_scale_ = T(scale), T(dropout_scale)
    batch, heads, length = q.shape[0], q.shape[1], q.shape[2]
    keys, value_dim = k.shape[2], v.shape[3]
    group = heads // k.shape[1]
    for e in range(cuda.grid(1), batch * heads * length, cuda.gridsize(1)):
        b, h, i = e // (heads * length), (e // length) % heads, e % length
        hk = h // group
        end = min(keys, i + 1) if causal else keys
        top, total = T(-np.inf), T(0)
        for j in range(end):
            s = _score(q, k, mask, b, h, hk, i, j, scale_, causal)
            if s > top:
                total = total * math.exp(top - s) + T(1)
                top = s
            elif s != T(-np.inf):
                total += math.exp(s - top)
        for c in range(value_dim):
            out[b, h, i, c] = T(0)
        if total == T(0):
            lse[b, h, i] = T(np.inf)
            continue
        for j in range(end):
            if _kept(seed, threshold, b, h, i, j, heads, length, keys):
                p = math.exp(_score(q, k, mask, b, h, hk, i, j, scale_, causal) - top) / total * dropout_scale_
                for c in range(value_dim):
                    out[b, h, i, c] += p * v[b, hk, j, c]
        lse[b, h, i] = top + math.log(total)


@device
def _score_gradient(q, k, v, mask, grad_out, lse, deltas, b, h, hk, i, j, scale, causal, seed, threshold,
                    dropout_scale):
    """(kept weight, d score) of query i and key j: P * keep * dropout_scale and
    P * (dP - D), dP the gradient of the dropped weight times keep * dropout_scale."""
    T = q.dtype.type
    p = math.exp(_score(q, k, mask, b, h, hk, i, j, scale, causal) - lse[b, h, i])
    if not _kept(seed, threshold, b, h, i, j, q.shape[1], q.shape[2], k.shape[2]):
        return T(0), -p * deltas[b, h, i]
    dp = _dot(grad_out, b, h, i, v, hk, j) * dropout_scale
    return p * dropout_scale, p * (dp - deltas[b, h, i])


@kernel
def attention_backward_queries(q, k, v, mask, scale, causal, seed, threshold, dropout_scale, out, grad_out, lse,
                               deltas, grad_q, grad_mask):
    """deltas[b, h, i] = grad_out . out of the row; grad_q; grad_mask (when it has a size)."""
    T = q.dtype.type
    scale_, dropout_scale_ = T(scale), T(dropout_scale)
    batch, heads, length, dim = q.shape
    keys = k.shape[2]
    group = heads // k.shape[1]
    for e in range(cuda.grid(1), batch * heads * length, cuda.gridsize(1)):
        b, h, i = e // (heads * length), (e // length) % heads, e % length
        hk = h // group
        deltas[b, h, i] = _dot(grad_out, b, h, i, out, h, i)
        for c in range(dim):
            grad_q[b, h, i, c] = T(0)
        for j in range(keys):
            _, ds = _score_gradient(q, k, v, mask, grad_out, lse, deltas, b, h, hk, i, j, scale_, causal, seed,
                                    threshold, dropout_scale_)
            if grad_mask.shape[3]:
                grad_mask[b, h, i, j] = ds
            for c in range(dim):
                grad_q[b, h, i, c] += ds * scale_ * k[b, hk, j, c]


@kernel
def attention_backward_keys(q, k, v, mask, scale, causal, seed, threshold, dropout_scale, grad_out, lse, deltas,
                            grad_k, grad_v):
    """grad_k and grad_v of each key row, summed over the query heads of its key/value head."""
    T = q.dtype.type
    scale_, dropout_scale_ = T(scale), T(dropout_scale)
    batch, heads, length, dim = q.shape
    kv_heads, keys, value_dim = k.shape[1], k.shape[2], v.shape[3]
    group = heads // kv_heads
    for e in range(cuda.grid(1), batch * kv_heads * keys, cuda.gridsize(1)):
        b, hk, j = e // (kv_heads * keys), (e // keys) % kv_heads, e % keys
        for c in range(dim):
            grad_k[b, hk, j, c] = T(0)
        for c in range(value_dim):
            grad_v[b, hk, j, c] = T(0)
        for h in range(hk * group, (hk + 1) * group):
            for i in range(j if causal else 0, length):
                p, ds = _score_gradient(q, k, v, mask, grad_out, lse, deltas, b, h, hk, i, j, scale_, causal, seed,
                                        threshold, dropout_scale_)
                for c in range(value_dim):
                    grad_v[b, hk, j, c] += p * grad_out[b, h, i, c]
                for c in range(dim):
                    grad_k[b, hk, j, c] += ds * scale_ * q[b, h, i, c]


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32 and float64."""
    from numba import types

    i64, b = types.int64, types.boolean
    cases = []
    for dt in (types.float32, types.float64):
        t4, t3, m4 = dt[:, :, :, ::1], dt[:, :, ::1], dt[:, :, :, :]
        head = (t4, t4, t4, m4, dt, b, i64, i64, dt)
        cases += [
            ("attention_forward", attention_forward.py_func, (*head, t4, t3)),
            ("attention_backward_queries", attention_backward_queries.py_func, (*head, t4, t4, t3, t3, t4, t4)),
            ("attention_backward_keys", attention_backward_keys.py_func, (*head, t4, t3, t3, t4, t4)),
        ]
    return cases
