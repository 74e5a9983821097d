"""CUDA kernels of fused scaled-dot-product attention (the CPU kernels' algorithm and layout, see
:mod:`zgrad.kernels.cpu.kernels.attention`; host side: :mod:`zgrad.kernels.cuda.attention`).

Forward: one thread per query row, two passes over its keys (never past the causal diagonal):
the row's maximum and sum of exponentials, then the weighted sum of values written into ``out``;
the row statistic ``lse`` is saved (+inf for a fully masked row, whose output is zero). Backward
in two launches, neither with atomics: one thread per query row (D = dO . out, saved in
``deltas``, and dQ), then one thread per key row (dK and dV over the query heads its key/value
head serves). Weights are recomputed from ``lse``; dropout regenerates the forward's mask with
:func:`zgrad.kernels.vocabulary.attention_keeps`. ``mask`` is a broadcast view of the additive
mask or, for none, an empty (1, 1, 1, 0) array.

With cuBLAS, the host runs attention as matrix products instead (``zgrad.kernels.cuda.attention``)
and these kernels only turn a chunk of raw scores q k^T into weights and score gradients:
:func:`attention_weights` (a warp per row where a warp holds the row:
:func:`attention_weights_warp_rows`), :func:`attention_score_gradients` (a block per row), and
:func:`attention_deltas` (D = dO . out per row, a warp per row). A chunk holds the key/value heads z0 .. z0 + Z - 1
(z = b * Hk + hk), each with the G * L query rows of the G query heads it serves, head-major: the
layout of q (B, Hq, L, E) read as (B * Hk, G * L, E). Kernels only.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel, math
from zgrad.kernels.cuda.kernels.rows import (
    MAX_BLOCK,
    WARP_ROW_PER_LANE,
    block_extreme,
    block_sum,
    warp_max,
    warp_rows,
    warp_sum,
)
from zgrad.kernels.vocabulary import attention_keeps

__all__ = [
    "attention_backward_keys",
    "attention_backward_queries",
    "attention_deltas",
    "attention_forward",
    "attention_score_gradients",
    "attention_weights",
    "attention_weights_warp_rows",
]

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


@device
def _chunk_row(scores, r, z0, kv_heads, group, length):
    """(chunk index, row in it, b, h, i) of row ``r`` of a chunk of scores (see the module docstring)."""
    zl, row = r // scores.shape[1], r % scores.shape[1]
    z = z0 + zl
    return zl, row, z // kv_heads, (z % kv_heads) * group + row // length, row % length


@device
def _masked(scores, zl, row, mask, b, h, i, j, scale, causal):
    """The raw product q . k at scores[zl, row, j] as the score the softmax takes: scaled, masked
    (-inf past the causal diagonal), plus the additive mask."""
    if causal and j > i:
        return -scores.dtype.type(np.inf)
    s = scores[zl, row, j] * scale
    if mask.shape[3]:
        s += mask[b, h, i, j]
    return s


@kernel
def attention_weights(scores, mask, scale, causal, seed, threshold, dropout_scale, kv_heads, z0, lse):
    """In place: each row of the chunk ``scores`` (raw products q k^T) becomes its softmax weights,
    dropped and scaled as the fused kernel keeps them (0 where dropped); lse[b, h, i] = the row's
    log-sum-exp (+inf, and all weights 0, for a fully masked row)."""
    buf = cuda.shared.array(MAX_BLOCK, scores.dtype)
    T = scores.dtype.type
    scale_, dropout_scale_ = T(scale), T(dropout_scale)
    heads, length, keys = lse.shape[1], lse.shape[2], scores.shape[2]
    group = heads // kv_heads
    t, step = cuda.threadIdx.x, cuda.blockDim.x
    for r in range(cuda.blockIdx.x, scores.shape[0] * scores.shape[1], cuda.gridDim.x):
        zl, row, b, h, i = _chunk_row(scores, r, z0, kv_heads, group, length)
        top = -T(np.inf)
        for j in range(t, keys, step):
            s = _masked(scores, zl, row, mask, b, h, i, j, scale_, causal)
            scores[zl, row, j] = s
            if s > top or s != s:
                top = s
        top = block_extreme(buf, top, True)
        total = T(0)
        if top != -T(np.inf):
            for j in range(t, keys, step):
                total += math.exp(scores[zl, row, j] - top)
        total = block_sum(buf, total)
        for j in range(t, keys, step):
            kept = total != T(0) and _kept(seed, threshold, b, h, i, j, heads, length, keys)
            scores[zl, row, j] = math.exp(scores[zl, row, j] - top) / total * dropout_scale_ if kept else T(0)
        if t == 0:
            lse[b, h, i] = top + math.log(total) if total != T(0) else T(np.inf)


@kernel
def attention_weights_warp_rows(scores, mask, scale, causal, seed, threshold, dropout_scale, kv_heads, z0, lse):
    """:func:`attention_weights` a warp per row, for rows of at most WARP_ROW_PER_LANE keys a lane:
    the row's scores held in the lanes' registers (one read), its max and sum by shuffles. The
    block's warps step through the rows together."""
    held = cuda.local.array(WARP_ROW_PER_LANE, scores.dtype)
    T = scores.dtype.type
    scale_, dropout_scale_ = T(scale), T(dropout_scale)
    heads, length, keys = lse.shape[1], lse.shape[2], scores.shape[2]
    group = heads // kv_heads
    rows = scores.shape[0] * scores.shape[1]
    lanes, lane, first, end, step = warp_rows(rows)
    for r in range(first, end, step):
        live = r < rows
        zl, row, b, h, i = _chunk_row(scores, r if live else 0, z0, kv_heads, group, length)
        top = -T(np.inf)
        for k in range(WARP_ROW_PER_LANE):
            j = lane + k * lanes
            s = _masked(scores, zl, row, mask, b, h, i, j, scale_, causal) if live and j < keys else -T(np.inf)
            held[k] = s
            if s > top or s != s:
                top = s
        top = warp_max(top, lanes)
        total = T(0)
        if top != -T(np.inf):
            for k in range(WARP_ROW_PER_LANE):
                if lane + k * lanes < keys:
                    total += math.exp(held[k] - top)
        total = warp_sum(total, lanes)
        if live:
            for k in range(WARP_ROW_PER_LANE):  # unrolled: the held scores stay in registers
                j = lane + k * lanes
                if j < keys:
                    scores[zl, row, j] = math.exp(held[k] - top) / total * dropout_scale_ if total != T(0) else T(0)
            if threshold != 0:  # dropout: zero the dropped weights (the hash's loop keeps this loop rolled)
                for j in range(lane, keys, lanes):
                    if not _kept(seed, threshold, b, h, i, j, heads, length, keys):
                        scores[zl, row, j] = T(0)
            if lane == 0:
                lse[b, h, i] = top + math.log(total) if total != T(0) else T(np.inf)


@kernel
def attention_score_gradients(scores, grad_weights, mask, scale, causal, seed, threshold, dropout_scale, kv_heads,
                              z0, lse, deltas, grad_mask):
    """In place, for a chunk: ``scores`` (raw q k^T) becomes the kept weights P * keep *
    dropout_scale, recomputed from ``lse``; ``grad_weights`` (dO v^T) becomes scale * dS, with dS =
    P * (dP - D) the gradient of the score (dP the kept weights' gradient: keep * dropout_scale *
    dO v^T); grad_mask[b, h, i, j] = dS where grad_mask has a size."""
    T = scores.dtype.type
    scale_, dropout_scale_ = T(scale), T(dropout_scale)
    heads, length, keys = lse.shape[1], lse.shape[2], scores.shape[2]
    group = heads // kv_heads
    for r in range(cuda.blockIdx.x, scores.shape[0] * scores.shape[1], cuda.gridDim.x):
        zl, row, b, h, i = _chunk_row(scores, r, z0, kv_heads, group, length)
        row_lse, delta = lse[b, h, i], deltas[b, h, i]
        for j in range(cuda.threadIdx.x, keys, cuda.blockDim.x):
            p = math.exp(_masked(scores, zl, row, mask, b, h, i, j, scale_, causal) - row_lse)
            if _kept(seed, threshold, b, h, i, j, heads, length, keys):
                weight, ds = p * dropout_scale_, p * (grad_weights[zl, row, j] * dropout_scale_ - delta)
            else:
                weight, ds = T(0), -p * delta
            scores[zl, row, j] = weight
            grad_weights[zl, row, j] = ds * scale_
            if grad_mask.shape[3]:
                grad_mask[b, h, i, j] = ds


@kernel
def attention_deltas(grad_out, out, deltas):
    """deltas[r] = grad_out[r] . out[r] for (rows, Ev) matrices: D of each query row, a warp per
    row (the block's warps step through the rows together)."""
    T = deltas.dtype.type
    rows, n = grad_out.shape
    lanes, lane, first, end, step = warp_rows(rows)
    for r in range(first, end, step):
        acc = T(0)
        if r < rows:
            for c in range(lane, n, lanes):
                acc += grad_out[r, c] * out[r, c]
        acc = warp_sum(acc, lanes)
        if r < rows and lane == 0:
            deltas[r] = acc


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
            ("attention_weights", attention_weights.py_func, (t3, m4, dt, b, i64, i64, dt, i64, i64, t3)),
            ("attention_weights_warp_rows", attention_weights_warp_rows.py_func,
             (t3, m4, dt, b, i64, i64, dt, i64, i64, t3)),
            ("attention_score_gradients", attention_score_gradients.py_func,
             (t3, t3, m4, dt, b, i64, i64, dt, i64, i64, t3, t3, t4)),
            ("attention_deltas", attention_deltas.py_func, (dt[:, ::1], dt[:, ::1], dt[::1])),
        ]
    return cases
