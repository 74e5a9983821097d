"""The CUDA backend's sorting, searching and scatter reductions: host side of the kernels of
:mod:`zgrad.kernels.cuda.kernels.sorting`.

Part of :mod:`zgrad.kernels.cuda.backend`; each function writes into ``out`` and returns it.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cuda import kernels
from zgrad.kernels.cuda import runtime as rt
from zgrad.kernels.cuda.array import DeviceArray
from zgrad.kernels.cuda.elementwise import binary_op, upload
from zgrad.kernels.cuda.reduce import contiguous, cumsum

__all__ = ["argsort", "nonzero", "scatter_reduce", "searchsorted"]


def _launch(kernel, count: int, *args) -> None:
    if count:
        rt.launch(kernel, rt.grid_1d(count), *(a.arg() if isinstance(a, DeviceArray) else a for a in args))


def argsort(x, descending, out):
    """out[r] = the stable order of the row x[r] (rows, n): ascending with NaN last, or descending
    with NaN first."""
    _launch(kernels.sorting.argsort_rows, x.size, contiguous(x), bool(descending), out)
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
