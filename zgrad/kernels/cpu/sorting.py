"""The CPU backend's sorting, searching and scatter reductions: numpy's stable sort for
``argsort`` and ``np.argwhere`` for ``nonzero``; the Numba loops of
:mod:`zgrad.kernels.cpu.kernels.search` for the rest.

Part of :mod:`zgrad.kernels.cpu.backend`; each function writes into ``out`` and returns it.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cpu import kernels

__all__ = ["argsort", "argsort_slices", "argtopk", "nonzero", "scatter_reduce", "searchsorted"]


def argsort(x, descending, out):
    """out[r] = the stable order of the row x[r] (rows, n): ascending with NaN last, or descending
    with NaN first; equal elements keep their order either way."""
    if not descending:
        out[...] = np.argsort(x, axis=1, kind="stable")
        return out
    # A stable ascending sort of the reversed rows, read backwards, is a stable descending sort.
    order = np.argsort(x[:, ::-1], axis=1, kind="stable")[:, ::-1]
    return np.subtract(x.shape[1] - 1, order, out=out)


def argtopk(x, k, largest, out):
    """out[r] = the positions of the ``k`` largest (or smallest) elements of the row x[r] (rows, n),
    in sorted order (NaN the largest; equal values by position): a partial selection, then a sort
    of the ``k`` selected only."""
    n = x.shape[1]
    if 4 * k >= n:
        out[...] = argsort(x, largest, np.empty(x.shape, np.int64))[:, :k]
        return out
    chosen = np.argpartition(x, n - k if largest else k - 1, axis=1)
    chosen = chosen[:, n - k:] if largest else chosen[:, :k]
    values = np.take_along_axis(x, chosen, axis=1)
    if largest:  # ascending by value then by descending position, reversed
        order = np.lexsort((-chosen, values), axis=-1)[:, ::-1]
    else:
        order = np.lexsort((chosen, values), axis=-1)
    out[...] = np.take_along_axis(chosen, order, axis=1)
    return out


def argsort_slices(slices, out):
    """out = the stable lexicographic order of the rows of ``slices`` (n, m), m >= 1: first
    column first, NaN last."""
    out[...] = np.lexsort(slices.T[::-1])
    return out


def nonzero(x, out):
    """out (count, ndim) = the coordinates of x's nonzero elements, in C order."""
    out[...] = np.argwhere(x)
    return out


def scatter_reduce(index, src, code, out):
    """out[o, index[o, j, i], i] = reduce(that, src[o, j, i]) on C-contiguous 3-D views, the
    reduction named by ``code`` (see :data:`zgrad.kernels.vocabulary.SCATTER_REDUCTIONS`)."""
    kernels.search.scatter_reduce(index, src, int(code), out)
    return out


def searchsorted(sequence, values, right, out):
    """out[r, j] = where values[r, j] goes in the ascending row sequence[r] (or sequence[0] when
    it has one row): the count of elements below it, or not above it when ``right``."""
    kernels.search.searchsorted(np.ascontiguousarray(sequence), np.ascontiguousarray(values), bool(right), out)
    return out
