"""Scatter reductions, binary searches and the search for nonzero elements, as Numba loops.

``scatter_reduce`` combines ``src`` into ``out`` along the middle axis of 3-D (outer, dim, inner)
views with one of :data:`zgrad.kernels.vocabulary.SCATTER_REDUCTIONS`; ``searchsorted`` finds
where each value of a row goes in the sorted row of the same number. Both compile the plain
Python rules of :mod:`zgrad.kernels.vocabulary`, shared with the CUDA kernels. Index values must
already be checked to lie in ``[0, size)``.
"""

from __future__ import annotations

from zgrad.kernels._jit import kernel
from zgrad.kernels.vocabulary import scatter_combine, search_position

__all__ = ["scatter_reduce", "searchsorted", "nonzero_coordinates"]

_combine = kernel(scatter_combine)
_position = kernel(search_position)


@kernel
def scatter_reduce(index, src, code, out):
    """out[o, index[o, j, i], i] = combine(that, src[o, j, i]) for every j in order."""
    outer, k, inner = index.shape
    for o in range(outer):
        for j in range(k):
            for i in range(inner):
                t = index[o, j, i]
                out[o, t, i] = _combine(out[o, t, i], src[o, j, i], code)


@kernel
def searchsorted(sequence, values, right, out):
    """out[r, j] = the position of values[r, j] in the ascending row ``sequence[r or 0]``."""
    rows, m = values.shape
    shared = sequence.shape[0] == 1
    for r in range(rows):
        row = 0 if shared else r
        for j in range(m):
            out[r, j] = _position(sequence, row, values[r, j], right)


@kernel
def nonzero_coordinates(flat, shape, out):
    """out[k] = the coordinates in an array of ``shape`` of the k-th nonzero element of ``flat``
    (that array's elements in C order; NaN counts as nonzero). ``out`` has a row per nonzero element."""
    k = 0
    ndim = shape.shape[0]
    for i in range(flat.shape[0]):
        if flat[i] != 0:
            rest = i
            for d in range(ndim - 1, -1, -1):
                out[k, d] = rest % shape[d]
                rest //= shape[d]
            k += 1
