"""CUDA kernels of sorting, searching and scatter reductions.

``merge_pass`` is one pass of a stable bottom-up merge sort of every row: one thread per element,
which finds its place in the merged pair of runs by a binary search (ceil(log2 n) passes, each
O(n log n) work). ``scatter_reduce`` runs one thread per
(outer, inner) column, which walks the index along the dimension in order: the columns write
disjoint parts of ``out``, so no atomics are needed and the result is deterministic.
``searchsorted`` is one binary search per value. The reduction and search rules are the plain
Python functions of :mod:`zgrad.kernels.vocabulary`, shared with the CPU kernels. Kernels only.
"""

from __future__ import annotations

from numba import cuda

from zgrad.kernels.cuda.kernels.common import device, kernel
from zgrad.kernels.vocabulary import scatter_combine, search_position

__all__ = ["merge_pass", "merge_slices_pass", "nonzero_coordinates", "scatter_reduce", "searchsorted"]

_combine = device(scatter_combine)
_position = device(search_position)


@device
def _sorts_before(a, b, descending):
    """Whether ``a`` sorts strictly before ``b``: NaN is the largest value."""
    if descending:
        return (a != a and b == b) or a > b
    return (b != b and a == a) or a < b


@kernel
def merge_pass(keys, order, width, first, descending, out_keys, out_order):
    """One pass of a stable bottom-up merge sort of every row of ``keys`` (rows, n): each pair of
    sorted runs of ``width`` is merged into out_keys, and the positions in ``order`` (or, on the
    ``first`` pass, the element's own position) travel with their keys into out_order. Each
    element finds its place by a binary search in the other run of its pair."""
    n = keys.shape[1]
    for e in range(cuda.grid(1), keys.size, cuda.gridsize(1)):
        r, i = e // n, e % n
        start = i - i % (2 * width)
        middle = min(start + width, n)
        end = min(start + 2 * width, n)
        v = keys[r, i]
        if i < middle:  # a left-run element goes after the right run's elements that sort before it
            low, high = middle, end
            while low < high:
                m = (low + high) // 2
                if _sorts_before(keys[r, m], v, descending):
                    low = m + 1
                else:
                    high = m
            destination = i + low - middle
        else:  # a right-run element goes after the left run's elements that sort before it or tie
            low, high = start, middle
            while low < high:
                m = (low + high) // 2
                if _sorts_before(v, keys[r, m], descending):
                    high = m
                else:
                    low = m + 1
            destination = i - middle + low
        out_keys[r, destination] = v
        out_order[r, destination] = i if first else order[r, i]


@device
def _slice_before(slices, a, b):
    """Whether row ``a`` of ``slices`` sorts strictly before row ``b``: lexicographically, NaN
    the largest value."""
    for j in range(slices.shape[1]):
        if _sorts_before(slices[a, j], slices[b, j], False):
            return True
        if _sorts_before(slices[b, j], slices[a, j], False):
            return False
    return False


@kernel
def merge_slices_pass(slices, order, width, first, out_order):
    """One pass of a stable bottom-up merge sort of the rows of ``slices`` (n, m), lexicographic:
    ``order`` holds the row numbers in the runs sorted so far (on the ``first`` pass, every
    position holds its own row); as :func:`merge_pass`, but the rows stay where they are."""
    n = slices.shape[0]
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        start = i - i % (2 * width)
        middle = min(start + width, n)
        end = min(start + 2 * width, n)
        row = i if first else order[i]
        if i < middle:
            low, high = middle, end
            while low < high:
                m = (low + high) // 2
                if _slice_before(slices, m if first else order[m], row):
                    low = m + 1
                else:
                    high = m
            destination = i + low - middle
        else:
            low, high = start, middle
            while low < high:
                m = (low + high) // 2
                if _slice_before(slices, row, m if first else order[m]):
                    high = m
                else:
                    low = m + 1
            destination = i - middle + low
        out_order[destination] = row


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
            ("merge_pass", merge_pass.py_func, (m, idx2, i64, b, b, m, idx2)),
            ("merge_slices_pass", merge_slices_pass.py_func, (m, idx, i64, b, idx)),
            ("nonzero_coordinates", nonzero_coordinates.py_func, (v, idx, idx, idx2)),
            ("scatter_reduce", scatter_reduce.py_func, (idx3, t3, i64, t3)),
            ("searchsorted", searchsorted.py_func, (m, m, b, idx2)),
        ]
    return cases
