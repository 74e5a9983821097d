"""CUDA kernels of sorting, searching and scatter reductions.

``argsort_rows`` gives each element its rank in its row (the count of elements that sort before
it, ties broken by position, so the order is stable) and writes its position there: one thread
per element, n comparisons each, no shared state. ``scatter_reduce`` runs one thread per
(outer, inner) column, which walks the index along the dimension in order: the columns write
disjoint parts of ``out``, so no atomics are needed and the result is deterministic.
``searchsorted`` is one binary search per value. The reduction and search rules are the plain
Python functions of :mod:`zgrad.kernels.vocabulary`, shared with the CPU kernels. Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel
from zgrad.kernels.vocabulary import scatter_combine, search_position

__all__ = ["argsort_rows", "nonzero_coordinates", "scatter_reduce", "searchsorted"]

_combine = device(scatter_combine)
_position = device(search_position)


@device
def _sorts_before(a, b, descending):
    """Whether ``a`` sorts strictly before ``b``: NaN is the largest value."""
    if descending:
        return (a != a and b == b) or a > b
    return (b != b and a == a) or a < b


@kernel
def argsort_rows(x, descending, out):
    """out[r, rank of x[r, i]] = i: the stable order of every row of x (rows, n)."""
    n = x.shape[1]
    for e in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        r, i = e // n, e % n
        v = x[r, i]
        rank = 0
        for j in range(n):
            w = x[r, j]
            if _sorts_before(w, v, descending) or (j < i and not _sorts_before(v, w, descending)):
                rank += 1
        out[r, rank] = i


@kernel
def nonzero_coordinates(x, ends, shape, out):
    """out[ends[e] - 1] = the coordinates of flat element e of an array of ``shape`` where x[e]
    is nonzero; ``ends`` is the running count of nonzero elements."""
    ndim = shape.size
    for e in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        if x[e] != 0:
            rest = e
            for d in range(ndim - 1, -1, -1):
                out[ends[e] - 1, d] = rest % shape[d]
                rest //= shape[d]


@kernel
def scatter_reduce(index, src, code, out):
    """out[o, index[o, j, i], i] = combine(that, src[o, j, i]), j in order, one thread per (o, i)."""
    k, inner = index.shape[1], index.shape[2]
    for e in range(cuda.grid(1), index.shape[0] * inner, cuda.gridsize(1)):
        o, i = e // inner, e % inner
        for j in range(k):
            t = index[o, j, i]
            out[o, t, i] = _combine(out[o, t, i], src[o, j, i], code)


@kernel
def searchsorted(sequence, values, right, out):
    """out[r, j] = the position of values[r, j] in the ascending row ``sequence[r or 0]``."""
    m = values.shape[1]
    shared = sequence.shape[0] == 1
    for e in range(cuda.grid(1), values.size, cuda.gridsize(1)):
        r, j = e // m, e % m
        out[r, j] = _position(sequence, 0 if shared else r, values[r, j], right)


def ptx_signatures() -> list:
    """(name, Python function, argument types) of every kernel here, for float32, float64 and
    int64 data."""
    from numba import types

    i64, b = types.int64, types.boolean
    idx, idx2, idx3 = i64[::1], i64[:, ::1], i64[:, :, ::1]
    cases = []
    for dt in (types.float32, types.float64, types.int64):
        v, m, t3 = dt[::1], dt[:, ::1], dt[:, :, ::1]
        cases += [
            ("argsort_rows", argsort_rows.py_func, (m, b, idx2)),
            ("nonzero_coordinates", nonzero_coordinates.py_func, (v, idx, idx, idx2)),
            ("scatter_reduce", scatter_reduce.py_func, (idx3, t3, i64, t3)),
            ("searchsorted", searchsorted.py_func, (m, m, b, idx2)),
        ]
    return cases
