"""The CUDA backend's sorting, searching and scatter reductions: host side of the kernels of
:mod:`zgrad.kernels.cuda.kernels.sorting`.

Part of :mod:`zgrad.kernels.cuda.backend`; each function writes into ``out`` and returns it.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import binary_op, unary_op, upload
from zgrad.kernels.cuda.index import gather
from zgrad.kernels.cuda.reduce import contiguous, cumsum

__all__ = ["argsort", "argsort_slices", "argtopk", "nonzero", "scatter_reduce", "searchsorted", "select_rows"]


def _launch(kernel, count: int, *args) -> None:
    if count:
        rt.launch(kernel, rt.grid_1d(count), *(a.arg() if isinstance(a, DeviceArray) else a for a in args))


def argsort(x, descending, out):
    """out[r] = the stable order of the row x[r] (rows, n): ascending with NaN last, or descending
    with NaN first. Merge passes of doubling width, between two pairs of buffers."""
    n = x.shape[1]
    keys, order = unary_op("copy", x, DeviceArray.empty(x.shape, x.dtype)), out  # the passes overwrite their keys
    spare_keys, spare_order = DeviceArray.empty(x.shape, x.dtype), DeviceArray.empty(x.shape, out.dtype)
    width, first = 1, True
    while width < n or first:
        _launch(kernels.sorting.merge_pass, x.size, keys, order, width, first, bool(descending), spare_keys,
                spare_order)
        keys, spare_keys, order, spare_order = spare_keys, keys, spare_order, order
        width, first = width * 2, False
    if order is not out:
        unary_op("copy", order, out)
    return out


def argtopk(x, k, largest, out):
    """out[r] = the positions of the ``k`` largest (or smallest) elements of the row x[r]: the
    first ``k`` of a full stable sort (as :func:`argsort`)."""
    order = argsort(x, largest, DeviceArray.empty(x.shape, out.dtype))
    return unary_op("copy", order[:, :k], out)


def select_rows(x, ranks, out):
    """out[r] = the position in row x[r] (rows, n) of its element of rank ranks[r] in the stable
    ascending order (NaN last): :func:`argsort`'s order read at the ranks."""
    rows, n = x.shape
    order = argsort(x, False, DeviceArray.empty(x.shape, out.dtype))
    gather(order.reshape(rows, n, 1), ranks.reshape(rows, 1, 1), out.reshape(rows, 1, 1))
    return out


def argsort_slices(slices, out):
    """out = the stable lexicographic order of the rows of ``slices`` (n, m): merge passes of
    doubling width that move row numbers, not rows."""
    slices, n = contiguous(slices), slices.shape[0]
    order, spare = out, DeviceArray.empty(out.shape, out.dtype)
    width, first = 1, True
    while width < n or first:
        _launch(kernels.sorting.merge_slices_pass, n, slices, order, width, first, spare)
        order, spare = spare, order
        width, first = width * 2, False
    if order is not out:
        unary_op("copy", order, out)
    return out


def nonzero(x, out):
    """out (count, ndim) = the coordinates of x's nonzero elements, in C order."""
    flat = contiguous(x).reshape(-1)
    ends = cumsum(binary_op("ne", flat, 0, DeviceArray.empty(flat.shape, np.dtype(np.bool_))), 0, False,
                  DeviceArray.empty(flat.shape, np.dtype(np.int64)))
    _launch(kernels.sorting.nonzero_coordinates, flat.size, flat, ends, upload(x.shape, np.int64), out)
    return out


def scatter_reduce(index, src, code, out):
    """out[o, index[o, j, i], i] = reduce(that, src[o, j, i]) on 3-D views, the reduction named by
    ``code`` (see :data:`zgrad.kernels.vocabulary.SCATTER_REDUCTIONS`)."""
    _launch(kernels.sorting.scatter_reduce, index.shape[0] * index.shape[2], index, src, int(code), out)
    return out


def searchsorted(sequence, values, right, out):
    """out[r, j] = where values[r, j] goes in the ascending row sequence[r] (or sequence[0] when
    it has one row)."""
    _launch(kernels.sorting.searchsorted, values.size, contiguous(sequence), contiguous(values), bool(right), out)
    return out
