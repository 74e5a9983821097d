"""Fused scaled-dot-product attention, forward and backward, flash-attention style.

Arrays are C-contiguous per head: q (B, Hq, L, E), k (B, Hk, S, E), v (B, Hk, S, Ev), out and
grad_out (B, Hq, L, Ev); key/value head ``hk`` serves the ``Hq // Hk`` consecutive query heads
from ``hk * Hq // Hk`` (grouped-query attention; Hq == Hk without it). ``mask`` is an additive
(B, Hq, L, S) float array, usually a broadcast view with zero strides (a (L, S) mask is read in
place), or empty (size 0) for none. ``causal`` masks key j for query i where j > i (the top-left
triangle, as PyTorch's ``is_causal``).

Forward, one task per (batch, key/value head), its query heads in turn: for a block of ``_ROWS``
queries, the keys are visited ``_KEYS`` at a time, never past the causal diagonal; the block of
scores is computed in cache, the running row maximum and sum of exponentials (online softmax) are
updated and the block of weights is multiplied into the output accumulator. Memory is the block
plus the (Ev, S) transposed values per task, never the (L, S) matrix. The saved row statistic is
``lse = max + log(sum)``; a row whose scores are all -inf (fully masked) gets a zero output and
``lse = +inf``, so that its recomputed weights are zero (PyTorch gives zeros there too, forward
and backward).

Backward, one task per (batch, key/value head), so the key and value gradients of a group are
summed by one task without races: per key block and query block the weights are recomputed from
``lse`` (transposed, keys by queries) and dV += P^T dO, dP = dO V^T, dS = P (dP - D) with
D = rowsum(dO * out), dK += dS^T Q, dQ += dS K.

Every product is written as dot products of contiguous rows (:func:`_products`), in tiles of 4 by
3 accumulators that LLVM keeps in vector registers; that is why the tasks keep transposed copies
of V (forward), Q, dO and K (backward). On a block the causal diagonal crosses, the products skip
the masked part of each group of rows (:func:`_bounds`).

Dropout (``threshold`` > 0) keeps weight (b, h, i, j) where :func:`attention_keeps` of its linear
position says so, for the call's ``seed``: the backward regenerates the forward's mask. Kept
weights are scaled by 1 / (1 - p) (``dropout_scale``; 0 for p = 1).
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from zgrad.kernels.cpu.kernels import vector_math
from zgrad.kernels._jit import kernel, parallel_kernel
from zgrad.kernels.vocabulary import attention_keeps

__all__ = ["attention_backward", "attention_forward"]

# Queries and keys per block: scores, weights and their gradients for one block stay in L2.
_ROWS = 96
_KEYS = 96

# Blocks per panel: the forward visits each block of keys once per panel of queries, the backward
# each block of queries once per panel of keys, so a block read from memory serves several from
# cache (at 1024 keys, K and V^T of a head no longer fit L2). The backward's panel carries five
# arrays per key (K, V, K^T, dK, dV): two blocks keep it in L2.
_QUERY_PANEL = 4 * _ROWS
_KEY_PANEL = 2 * _KEYS

# Elements added to each row of the transposed copies: rows of a power-of-two length (1024 keys:
# 4 KiB apart) would all fall into the same L1 cache sets, and the products read 64 of them at a
# time; one cache line more per row spreads them over the sets.
_ROW_PADDING = 16

# The work of a call grows with q.size * S; from this many query elements on (e.g. 2 heads of
# 128 x 64 queries) the tasks are split across threads.
PARALLEL_MIN_QUERY_SIZE = 1 << 14

_keeps = kernel(attention_keeps)


# How a block on the causal diagonal trims a product (``trim``), so that the part of each group of
# rows the mask leaves out is not computed: columns or reduction positions below ``skew`` + row + the
# group's height, or from ``skew`` + row on.
FULL_BLOCK, COLS_BELOW, DEPTH_BELOW, COLS_FROM, DEPTH_FROM = 0, 1, 2, 3, 4


@kernel
def _bounds(trim, skew, x, height, cols, depth):
    """(first column, end column, first r, end r) of rows x .. x + height - 1 of a product."""
    first_col, end_col, first_r, end_r = 0, cols, 0, depth
    if trim == COLS_BELOW:
        end_col = min(cols, max(skew + x + height, 0))
    elif trim == DEPTH_BELOW:
        end_r = min(depth, max(skew + x + height, 0))
    elif trim == COLS_FROM:
        first_col = min(max(skew + x, 0), cols)
    elif trim == DEPTH_FROM:
        first_r = min(max(skew + x, 0), depth)
    return first_col, end_col, first_r, end_r


@kernel(reduction=True)
def _products(a, a_row, a_col, b, b_row, b_col, depth, rows, cols, accumulate, trim, skew, out, out_row, out_col):
    """out[out_row + x, out_col + y] (+)= sum over r < depth of a[a_row + x, a_col + r] *
    b[b_row + y, b_col + r], for x < rows, y < cols (less what ``trim`` leaves out, see
    :func:`_bounds`; those outputs are not written): dot products of contiguous rows, 4 x 3 at a
    time (12 accumulators and 7 row vectors fit the 16 vector registers).

    Rows are taken as slices and indexed from 0, so that no index can be negative: an offset
    index would make Numba wrap it around, which stops LLVM from vectorizing the loads.
    """
    zero = out.dtype.type(0)
    full_rows = rows - rows % 4
    for x in range(0, full_rows, 4):
        first_col, end_col, first_r, end_r = _bounds(trim, skew, x, 4, cols, depth)
        a_first, a_end, b_first, b_end = a_col + first_r, a_col + end_r, b_col + first_r, b_col + end_r
        n = end_r - first_r
        a0, a1 = a[a_row + x, a_first:a_end], a[a_row + x + 1, a_first:a_end]
        a2, a3 = a[a_row + x + 2, a_first:a_end], a[a_row + x + 3, a_first:a_end]
        o0, o1 = out[out_row + x, out_col:out_col + cols], out[out_row + x + 1, out_col:out_col + cols]
        o2, o3 = out[out_row + x + 2, out_col:out_col + cols], out[out_row + x + 3, out_col:out_col + cols]
        full_end = end_col - (end_col - first_col) % 3
        for y in range(first_col, full_end, 3):
            b0, b1, b2 = b[b_row + y, b_first:b_end], b[b_row + y + 1, b_first:b_end], b[b_row + y + 2, b_first:b_end]
            s00 = s01 = s02 = s10 = s11 = s12 = s20 = s21 = s22 = s30 = s31 = s32 = zero
            for r in range(n):
                x0, x1, x2, x3 = a0[r], a1[r], a2[r], a3[r]
                y0, y1, y2 = b0[r], b1[r], b2[r]
                s00 += x0 * y0
                s01 += x0 * y1
                s02 += x0 * y2
                s10 += x1 * y0
                s11 += x1 * y1
                s12 += x1 * y2
                s20 += x2 * y0
                s21 += x2 * y1
                s22 += x2 * y2
                s30 += x3 * y0
                s31 += x3 * y1
                s32 += x3 * y2
            if accumulate:
                s00 += o0[y]
                s01 += o0[y + 1]
                s02 += o0[y + 2]
                s10 += o1[y]
                s11 += o1[y + 1]
                s12 += o1[y + 2]
                s20 += o2[y]
                s21 += o2[y + 1]
                s22 += o2[y + 2]
                s30 += o3[y]
                s31 += o3[y + 1]
                s32 += o3[y + 2]
            o0[y], o0[y + 1], o0[y + 2] = s00, s01, s02
            o1[y], o1[y + 1], o1[y + 2] = s10, s11, s12
            o2[y], o2[y + 1], o2[y + 2] = s20, s21, s22
            o3[y], o3[y + 1], o3[y + 2] = s30, s31, s32
        for y in range(full_end, end_col):
            by = b[b_row + y, b_first:b_end]
            s0 = s1 = s2 = s3 = zero
            for r in range(n):
                w = by[r]
                s0 += a0[r] * w
                s1 += a1[r] * w
                s2 += a2[r] * w
                s3 += a3[r] * w
            if accumulate:
                s0 += o0[y]
                s1 += o1[y]
                s2 += o2[y]
                s3 += o3[y]
            o0[y], o1[y], o2[y], o3[y] = s0, s1, s2, s3
    for x in range(full_rows, rows):
        first_col, end_col, first_r, end_r = _bounds(trim, skew, x, 1, cols, depth)
        ax, ox = a[a_row + x, a_col + first_r:a_col + end_r], out[out_row + x, out_col:out_col + cols]
        for y in range(first_col, end_col):
            by = b[b_row + y, b_col + first_r:b_col + end_r]
            s = zero
            for r in range(end_r - first_r):
                s += ax[r] * by[r]
            ox[y] = s + ox[y] if accumulate else s


@kernel
def _key_end(causal, row_end, keys):
    """How many keys the queries before ``row_end`` see."""
    return min(keys, row_end) if causal else keys


@kernel
def _transpose_block(a, rows, cols, out):
    """out[:cols, :rows] = a[:rows, :cols]^T."""
    for x in range(rows):
        for y in range(cols):
            out[y, x] = a[x, y]


@kernel(reduction=True)
def _softmax_block(scores, row, j0, j1, causal, i, scale, mask_row, stats, seed, first_index, threshold):
    """Turn scores[row, :j1 - j0] (keys j0..j1) into weights for the online softmax of query i:
    stats[0] (running max) and stats[1] (running sum) are updated; returns the factor the row's
    accumulator is rescaled by. Dropped weights (after the sum) are zeroed."""
    t = scores.dtype.type
    n = j1 - j0
    s_row = scores[row, :n]
    if mask_row.size:
        mask_part = mask_row[j0:j1]
        for j in range(n):
            s_row[j] = s_row[j] * scale + mask_part[j]
    else:
        for j in range(n):
            s_row[j] *= scale
    if causal:  # keys j > i are not seen
        for j in range(max(i + 1 - j0, 0), n):
            s_row[j] = -np.inf
    block_max = t(-np.inf)
    for j in range(n):
        block_max = vector_math.maximum(block_max, s_row[j])
    new_max = vector_math.maximum(t(stats[0]), block_max)
    if new_max == -np.inf:  # every key so far masked
        s_row[:n] = 0
        return t(1)
    correction = vector_math.exp(t(stats[0]) - new_max)
    total = t(0)
    for j in range(n):
        p = vector_math.exp(s_row[j] - new_max)
        s_row[j] = p
        total += p
    if threshold:
        for j in range(n):
            if not _keeps(seed, first_index + j0 + j, threshold):
                s_row[j] = 0
    stats[0] = new_max
    stats[1] = stats[1] * correction + total
    return correction


@parallel_kernel(min_size=PARALLEL_MIN_QUERY_SIZE, reduction=True)
def attention_forward(q, k, v, mask, scale, causal, seed, threshold, dropout_scale, out, lse):
    """out = softmax(q k^T * scale + mask) v (see the module docstring); lse (B, Hq, L)."""
    batch, heads, length, dim = q.shape
    kv_heads, keys, value_dim = k.shape[1], k.shape[2], v.shape[3]
    group = heads // kv_heads
    t = q.dtype.type
    scale_, dropout_scale_ = t(scale), t(dropout_scale)
    for task in prange(batch * kv_heads):
        b, hk = task // kv_heads, task % kv_heads
        values_t = np.empty((value_dim, keys + _ROW_PADDING), q.dtype)
        _transpose_block(v[b, hk], keys, value_dim, values_t)
        scores = np.empty((_ROWS, _KEYS), q.dtype)
        stats = np.empty((_QUERY_PANEL, 2), np.float64)
        for h in range(hk * group, (hk + 1) * group):
            qh, kh, oh = q[b, h], k[b, hk], out[b, h]
            oh[:] = 0
            for p0 in range(0, length, _QUERY_PANEL):
                p1 = min(p0 + _QUERY_PANEL, length)
                stats[:, 0] = -np.inf
                stats[:, 1] = 0.0
                for j0 in range(0, _key_end(causal, p1, keys), _KEYS):
                    j1 = min(j0 + _KEYS, keys)
                    for i0 in range(p0, p1, _ROWS):
                        i1 = min(i0 + _ROWS, p1)
                        if causal and j0 >= i1:  # the block lies above the diagonal
                            continue
                        diagonal = causal and j1 > i0 + 1
                        _products(qh, i0, 0, kh, j0, 0, dim, i1 - i0, j1 - j0, False,
                                  COLS_BELOW if diagonal else FULL_BLOCK, i0 - j0, scores, 0, 0)
                        for i in range(i0, i1):
                            mask_row = mask[b, h, i] if mask.size else mask[0, 0, 0]
                            correction = _softmax_block(scores, i - i0, j0, j1, causal, i, scale_, mask_row,
                                                        stats[i - p0], seed, ((b * heads + h) * length + i) * keys,
                                                        threshold)
                            if correction != 1:
                                for c in range(value_dim):
                                    oh[i, c] *= correction
                        _products(scores, 0, 0, values_t, 0, j0, j1 - j0, i1 - i0, value_dim, True,
                                  DEPTH_BELOW if diagonal else FULL_BLOCK, i0 - j0, oh, i0, 0)
                for i in range(p0, p1):
                    total = stats[i - p0, 1]
                    if total == 0.0:  # a fully masked row
                        oh[i, :] = 0
                        lse[b, h, i] = np.inf
                    else:
                        factor = t(dropout_scale_ / total)
                        for c in range(value_dim):
                            oh[i, c] *= factor
                        lse[b, h, i] = stats[i - p0, 0] + math.log(total)


@kernel(reduction=True)
def _row_dots(a, b, out):
    """out[i] = a[i] . b[i] over rows, in float64."""
    for i in range(a.shape[0]):
        s = 0.0
        for c in range(a.shape[1]):
            s += np.float64(a[i, c]) * np.float64(b[i, c])
        out[i] = s


@kernel(reduction=True)
def _weight_gradients(weights_t, dweights_t, j0, i0, rows, cols, causal, scale, mask, lse, deltas, seed,
                      first_index, keys, threshold, dropout_scale, grad_mask):
    """From scores^T (keys j0.. by queries i0..) in ``weights_t`` and dO V^T in ``dweights_t``:
    weights_t becomes the (dropped, scaled) weights P^T, dweights_t the score gradient
    dS^T * scale; with a ``grad_mask`` (size > 0), dS^T is written there too.

    The options are tested once per row, outside the loops over a row, so that the loop of the
    common case (no mask, no dropout) is straight arithmetic LLVM vectorizes.
    """
    t = weights_t.dtype.type
    lse_part, deltas_part = lse[i0:i0 + cols], deltas[i0:i0 + cols]
    for x in range(rows):
        j = j0 + x
        w_row, d_row = weights_t[x, :cols], dweights_t[x, :cols]
        if mask.size:
            for y in range(cols):
                w_row[y] = w_row[y] * scale + mask[i0 + y, j]
        else:
            for y in range(cols):
                w_row[y] *= scale
        if causal:  # queries i < j do not see key j (and their products were skipped: see _bounds)
            for y in range(min(max(j - i0, 0), cols)):
                w_row[y] = -np.inf
                d_row[y] = 0
        if threshold:
            for y in range(cols):
                p = vector_math.exp(w_row[y] - lse_part[y])
                if _keeps(seed, first_index + (i0 + y) * keys + j, threshold):
                    w_row[y] = p * dropout_scale
                    d_row[y] = p * (d_row[y] * dropout_scale - deltas_part[y])
                else:
                    w_row[y] = t(0)
                    d_row[y] = -p * deltas_part[y]
        else:
            for y in range(cols):
                p = vector_math.exp(w_row[y] - lse_part[y])
                w_row[y] = p
                d_row[y] = p * (d_row[y] - deltas_part[y])
        if grad_mask.size:
            for y in range(cols):
                grad_mask[i0 + y, j] = d_row[y]
        for y in range(cols):
            d_row[y] *= scale


@parallel_kernel(min_size=PARALLEL_MIN_QUERY_SIZE, reduction=True)
def attention_backward(q, k, v, mask, scale, causal, seed, threshold, dropout_scale, out, grad_out, lse, grad_q,
                       grad_k, grad_v, grad_mask):
    """Gradients of :func:`attention_forward` into grad_q, grad_k, grad_v (and, when it has a
    size, grad_mask (B, Hq, L, S): the gradient of an additive mask)."""
    batch, heads, length, dim = q.shape
    kv_heads, keys, value_dim = k.shape[1], k.shape[2], v.shape[3]
    group = heads // kv_heads
    t = q.dtype.type
    scale_, dropout_scale_ = t(scale), t(dropout_scale)
    for task in prange(batch * kv_heads):
        b, hk = task // kv_heads, task % kv_heads
        kh, vh, gk, gv = k[b, hk], v[b, hk], grad_k[b, hk], grad_v[b, hk]
        gk[:] = 0
        gv[:] = 0
        keys_t = np.empty((dim, keys + _ROW_PADDING), q.dtype)
        _transpose_block(kh, keys, dim, keys_t)
        queries_t = np.empty((dim, length + _ROW_PADDING), q.dtype)
        grad_out_t = np.empty((value_dim, length + _ROW_PADDING), q.dtype)
        deltas = np.empty(length, q.dtype)
        weights_t = np.empty((_KEYS, _ROWS), q.dtype)
        dweights_t = np.empty((_KEYS, _ROWS), q.dtype)
        dweights = np.empty((_ROWS, _KEYS), q.dtype)
        for h in range(hk * group, (hk + 1) * group):
            qh, doh, gq = q[b, h], grad_out[b, h], grad_q[b, h]
            gq[:] = 0
            _transpose_block(qh, length, dim, queries_t)
            _transpose_block(doh, length, value_dim, grad_out_t)
            _row_dots(doh, out[b, h], deltas)
            mask_h = mask[b, h] if mask.size else mask[0, 0]
            grad_mask_h = grad_mask[b, h] if grad_mask.size else grad_mask[0, 0]
            first_index = (b * heads + h) * length * keys
            for p0 in range(0, keys, _KEY_PANEL):
                p1 = min(p0 + _KEY_PANEL, keys)
                for i0 in range(p0 - p0 % _ROWS if causal else 0, length, _ROWS):
                    i1 = min(i0 + _ROWS, length)
                    for j0 in range(p0, p1, _KEYS):
                        if causal and j0 >= i1:  # this and the later key blocks lie above the diagonal
                            break
                        j1 = min(j0 + _KEYS, p1)
                        rows, cols = j1 - j0, i1 - i0
                        diagonal = causal and j1 > i0 + 1
                        from_diagonal = COLS_FROM if diagonal else FULL_BLOCK
                        _products(kh, j0, 0, qh, i0, 0, dim, rows, cols, False, from_diagonal, j0 - i0, weights_t,
                                  0, 0)
                        _products(vh, j0, 0, doh, i0, 0, value_dim, rows, cols, False, from_diagonal, j0 - i0,
                                  dweights_t, 0, 0)
                        _weight_gradients(weights_t, dweights_t, j0, i0, rows, cols, causal, scale_, mask_h,
                                          lse[b, h], deltas, seed, first_index, keys, threshold, dropout_scale_,
                                          grad_mask_h)
                        depth_from = DEPTH_FROM if diagonal else FULL_BLOCK
                        _products(weights_t, 0, 0, grad_out_t, 0, i0, cols, rows, value_dim, True, depth_from,
                                  j0 - i0, gv, j0, 0)
                        _products(dweights_t, 0, 0, queries_t, 0, i0, cols, rows, dim, True, depth_from, j0 - i0,
                                  gk, j0, 0)
                        _transpose_block(dweights_t, rows, cols, dweights)
                        _products(dweights, 0, 0, keys_t, 0, j0, rows, cols, dim, True,
                                  DEPTH_BELOW if diagonal else FULL_BLOCK, i0 - j0, gq, i0, 0)
