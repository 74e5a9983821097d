"""Gather and scatter along one dimension, as Numba loops over 3-D (outer, dim, inner) views.

The caller reshapes an n-d tensor around the indexed dimension: ``x`` becomes
``(outer, size, inner)`` and the index ``(outer, k, inner)`` (``index_add`` takes one 1-D index
for every (outer, inner) position, as ``index_select``'s backward needs). Index values must
already be checked to lie in ``[0, size)``. The common case of indexing the last dimension
(inner == 1) has its own loop: a length-1 innermost loop would cost more than the element it
moves.

The kernels are serial: these loops are bound by random memory access, and their prange
variants measured slower (figures: bench/README.md, Design figures).
"""

from __future__ import annotations

from zgrad.kernels._jit import kernel

__all__ = ["gather", "index_add", "scatter", "scatter_add"]


@kernel
def gather(x, index, out):
    """out[o, j, i] = x[o, index[o, j, i], i]."""
    outer, k, inner = out.shape
    if inner == 1:
        for o in range(outer):
            for j in range(k):
                out[o, j, 0] = x[o, index[o, j, 0], 0]
        return
    for o in range(outer):
        for j in range(k):
            for i in range(inner):
                out[o, j, i] = x[o, index[o, j, i], i]


@kernel
def scatter_add(index, src, out):
    """out[o, index[o, j, i], i] += src[o, j, i] (repeated indices add up)."""
    outer, k, inner = index.shape
    if inner == 1:
        for o in range(outer):
            for j in range(k):
                out[o, index[o, j, 0], 0] += src[o, j, 0]
        return
    for o in range(outer):
        for j in range(k):
            for i in range(inner):
                out[o, index[o, j, i], i] += src[o, j, i]


@kernel
def scatter(index, src, out):
    """out[o, index[o, j, i], i] = src[o, j, i] (of repeated indices, the last one wins)."""
    outer, k, inner = index.shape
    if inner == 1:
        for o in range(outer):
            for j in range(k):
                out[o, index[o, j, 0], 0] = src[o, j, 0]
        return
    for o in range(outer):
        for j in range(k):
            for i in range(inner):
                out[o, index[o, j, i], i] = src[o, j, i]


@kernel
def index_add(index, src, out):
    """out[o, index[j], i] += src[o, j, i] (repeated indices add up): the backward of index_select."""
    outer, k, inner = src.shape
    for o in range(outer):
        for j in range(k):
            row = index[j]
            for i in range(inner):
                out[o, row, i] += src[o, j, i]
