"""Numba kernels of embedding lookups: row gather, bag reductions, and their scatter-add backward.

``weight`` is (num_embeddings, D) C-contiguous; indices are int64 and already checked to lie in
[0, num_embeddings) by the dispatch layer. ``padding_idx`` is a row index or -1 for none.

Bags are given by ``bounds`` (num_bags + 1,): bag b holds ``indices[bounds[b]:bounds[b + 1]]``.
``mode`` is 0 (sum), 1 (mean) or 2 (max). Entries equal to ``padding_idx`` are left out of their
bag (and out of a mean's count), as in PyTorch.

The scatter-add backward kernels run on one thread. Into a fresh (calloc'd) table their cost is
the first touch of the table's pages (each 2 MB huge page touched is zeroed then), which a second
thread only contends for (figures: bench/README.md, Design figures).
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from zgrad.kernels._jit import kernel, parallel_kernel

__all__ = [
    "embedding_backward",
    "embedding_bag_backward",
    "embedding_bag_forward",
    "embedding_bag_per_sample_weights_backward",
    "embedding_forward",
    "embedding_renorm",
]

MODE_SUM, MODE_MEAN, MODE_MAX = 0, 1, 2
# Row copies are memory-bound: parallel from the size of the other memory-bound loops, counted in
# the first argument, which is why the forward kernels take ``out`` (the index count times D: the
# work) first.


@kernel
def _index_counts(indices, rows, enabled):
    """How often each row index occurs in ``indices`` (an empty array unless ``enabled``)."""
    counts = np.zeros(rows if enabled else 0, np.int64)
    if enabled:
        for k in range(indices.size):
            counts[indices[k]] += 1
    return counts


@parallel_kernel()
def embedding_forward(out, weight, indices):
    """out[k] = weight[indices[k]] for every k (``out`` is (len(indices), D))."""
    for k in prange(indices.size):
        row = weight[indices[k]]
        dest = out[k]
        for j in range(row.size):
            dest[j] = row[j]


@kernel
def embedding_backward(grad, indices, padding_idx, scale_grad_by_freq, out):
    """out[indices[k]] += grad[k] for every k, skipping ``padding_idx``; ``out`` starts zeroed.

    With ``scale_grad_by_freq`` each row's contribution is divided by how often its index occurs.
    """
    counts = _index_counts(indices, out.shape[0], scale_grad_by_freq)
    one = out.dtype.type(1)
    for k in range(indices.size):
        index = indices[k]
        if index == padding_idx:
            continue
        dest, src = out[index], grad[k]
        if scale_grad_by_freq:
            scale = one / out.dtype.type(counts[index])
            for j in range(dest.size):
                dest[j] += src[j] * scale
        else:
            for j in range(dest.size):
                dest[j] += src[j]


@kernel
def embedding_renorm(weight, indices, max_norm, norm_type):
    """Rescale, in place, each indexed row whose ``norm_type``-norm exceeds ``max_norm`` to
    max_norm / (norm + 1e-7) of itself (PyTorch's ``embedding_renorm_``)."""
    for k in range(indices.size):
        row = weight[indices[k]]
        norm = 0.0
        if math.isinf(norm_type):
            for j in range(row.size):
                norm = max(norm, abs(np.float64(row[j])))
        else:
            for j in range(row.size):
                norm += abs(np.float64(row[j])) ** norm_type
            norm = norm ** (1.0 / norm_type)
        if norm > max_norm:
            scale = row.dtype.type(max_norm / (norm + 1e-7))
            for j in range(row.size):
                row[j] *= scale


@parallel_kernel()
def embedding_bag_forward(out, weight, indices, bounds, per_sample_weights, mode, padding_idx,
                          bag_size, max_indices):
    """out[b] = the sum, mean or max of the rows of bag b (zero for an empty bag).

    ``per_sample_weights`` (size 0: none) multiplies each row first (sum mode). Writes each
    bag's entry count to ``bag_size``; in max mode ``max_indices`` (num_bags, D) gets the row that
    gave each maximum (-1 for an empty bag), else it is empty.
    """
    zero = out.dtype.type(0)
    weighted = per_sample_weights.size > 0
    for b in prange(bounds.size - 1):
        dest = out[b]
        for j in range(dest.size):
            dest[j] = zero
        count = 0
        for k in range(bounds[b], bounds[b + 1]):
            index = indices[k]
            if index == padding_idx:
                continue
            row = weight[index]
            if mode == MODE_MAX:
                arg = max_indices[b]
                for j in range(dest.size):
                    if count == 0 or row[j] > dest[j]:
                        dest[j] = row[j]
                        arg[j] = index
            elif weighted:
                scale = per_sample_weights[k]
                for j in range(dest.size):
                    dest[j] += row[j] * scale
            else:
                for j in range(dest.size):
                    dest[j] += row[j]
            count += 1
        bag_size[b] = count
        if mode == MODE_MAX and count == 0:
            for j in range(dest.size):
                max_indices[b, j] = -1
        if mode == MODE_MEAN and count > 0:
            divisor = out.dtype.type(count)
            for j in range(dest.size):
                dest[j] /= divisor


@kernel
def embedding_bag_backward(grad, indices, bounds, per_sample_weights, mode, padding_idx, scale_grad_by_freq,
                           bag_size, max_indices, out):
    """The gradient of :func:`embedding_bag_forward` with respect to ``weight``, added into the
    zeroed ``out`` (num_embeddings, D); ``scale_grad_by_freq`` as for :func:`embedding_backward`
    (sum and mean modes)."""
    width = grad.shape[1]
    weighted = per_sample_weights.size > 0
    counts = _index_counts(indices, out.shape[0], scale_grad_by_freq)
    one = out.dtype.type(1)
    for b in range(bounds.size - 1):
        src = grad[b]
        if mode == MODE_MAX:
            for j in range(width):
                if max_indices[b, j] >= 0:
                    out[max_indices[b, j], j] += src[j]
            continue
        for k in range(bounds[b], bounds[b + 1]):
            index = indices[k]
            if index == padding_idx:
                continue
            dest = out[index]
            scale = per_sample_weights[k] if weighted else one
            if scale_grad_by_freq:
                scale /= out.dtype.type(counts[index])
            if mode == MODE_MEAN:
                divisor = out.dtype.type(bag_size[b])
                for j in range(width):
                    dest[j] += src[j] / divisor * scale
            else:
                for j in range(width):
                    dest[j] += src[j] * scale


@parallel_kernel(reduction=True)
def embedding_bag_per_sample_weights_backward(grad, weight, indices, bounds, padding_idx, out):
    """out[k] = dot(grad[bag of k], weight[indices[k]]) (0 for padding entries), sum mode."""
    for b in prange(bounds.size - 1):
        src = grad[b]
        for k in range(bounds[b], bounds[b + 1]):
            index = indices[k]
            total = 0.0
            if index != padding_idx:
                row = weight[index]
                for j in range(row.size):
                    total += np.float64(src[j]) * np.float64(row[j])
            out[k] = total
