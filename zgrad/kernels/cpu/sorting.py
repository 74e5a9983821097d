"""The CPU backend's sorting, searching and scatter reductions: sorts and selections of the
packed keys of :mod:`zgrad.kernels.cpu.kernels.sort_keys` (numpy's stable sort for 64-bit values),
the Numba loops of :mod:`zgrad.kernels.cpu.kernels.search` for the rest (``np.argwhere`` finds the
nonzero elements of the half-precision dtypes, which Numba does not know).

Part of :mod:`zgrad.kernels.cpu.backend`; each function writes into ``out`` and returns it.
"""

from __future__ import annotations

import numpy as np

from zgrad.kernels.cpu import kernels
from zgrad.kernels.cpu.parts import run_in_parts
from zgrad.kernels.scratch import Workspace, workspace
from zgrad.kernels.promotion import HALF_DTYPES

__all__ = ["argsort", "argsort_slices", "argtopk", "nonzero", "scatter_reduce", "searchsorted", "select_rows"]

_LOW_HALF = np.uint64(0xFFFFFFFF)
# Keys a selection works on at once (2 MB): over 16M float32 elements, rows of 1024, top 8 took
# 15.7-16.4 ms this way against 33.9 ms with every key at once (figures: bench/README.md).
_SELECTION_CHUNK = 1 << 18


def _key_bits(x):
    """(the int32 rows the key kernels of :mod:`kernels.sort_keys` take for the rows ``x``, whether
    they are float bits), or None where the values take more than 32 bits."""
    if x.shape[1] > _LOW_HALF:
        return None
    if x.dtype == np.float32 or x.dtype in HALF_DTYPES:
        return np.ascontiguousarray(x, np.float32).view(np.int32), True
    if x.dtype.kind in "biu" and x.dtype.itemsize < 4 or x.dtype == np.int32:
        return np.ascontiguousarray(x, np.int32), False
    return None


def _sort_keys(x, descending: bool):
    """The (rows, n) uint64 keys of the rows ``x``: sorted ascending they give the stable order,
    ascending with NaN last (``descending``: descending with NaN first). None where the values
    take more than 32 bits."""
    bits = _key_bits(x)
    if bits is None:
        return None
    keys = np.empty(x.shape, np.uint64)
    if keys.size:
        kernels.sort_keys.pack(*bits, bool(descending), keys)
    return keys


def _positions(keys, out):
    """out = the columns the keys came from (their low halves), as int64."""
    np.bitwise_and(keys, _LOW_HALF, out=out.view(np.uint64))
    return out


def argsort(x, descending, out):
    """out[r] = the stable order of the row x[r] (rows, n): ascending with NaN last, or descending
    with NaN first; equal elements keep their order either way."""
    keys = _sort_keys(x, descending)
    if keys is not None:
        keys.sort(axis=1)
        return _positions(keys, out)
    if not descending:
        out[...] = np.argsort(x, axis=1, kind="stable")
        return out
    # A stable ascending sort of the reversed rows, read backwards, is a stable descending sort.
    order = np.argsort(x[:, ::-1], axis=1, kind="stable")[:, ::-1]
    return np.subtract(x.shape[1] - 1, order, out=out)


def argtopk(x, k, largest, out):
    """out[r] = the positions of the ``k`` largest (or smallest) elements of the row x[r] (rows, n),
    in sorted order (NaN the largest; equal values by position): :func:`argsort`'s first ``k``: a
    selection of the ``k`` smallest packed keys and a sort of those only, where the values fit the
    keys. The keys are packed and selected a chunk of rows at a time, so that they stay in cache,
    the chunks split between zgrad's threads."""
    bits = _key_bits(x)
    if bits is None:
        out[...] = argsort(x, largest, np.empty(x.shape, np.int64))[:, :k]
        return out
    if 4 * k >= x.shape[1]:
        keys = _sort_keys(x, largest)
        keys.sort(axis=1)
        return _positions(keys[:, :k], out)
    rows, columns = x.shape
    chunk = max(1, _SELECTION_CHUNK // columns)
    starts = range(0, rows, chunk)

    def part(index: int, parts: int, scratch: Workspace) -> None:
        keys = scratch.take("topk keys", (min(chunk, rows), columns), np.uint64)
        for start in starts[index::parts]:
            stop = min(start + chunk, rows)
            selected = keys[:stop - start]
            kernels.sort_keys.pack.serial(bits[0][start:stop], bits[1], bool(largest), selected)
            selected.partition(k - 1, axis=1)  # in place: a second array of keys costs more than the selection
            _positions(np.sort(selected[:, :k], axis=1), out[start:stop])

    with workspace() as scratch:
        run_in_parts(part, len(starts), scratch)
    return out


def select_rows(x, ranks, out):
    """out[r] = the position in row x[r] (rows, n) of its element of rank ranks[r] in the stable
    ascending order (NaN last): a selection, without sorting the rows."""
    keys = _sort_keys(x, False)
    if keys is None:
        order = argsort(x, False, np.empty(x.shape, np.int64))
        out[...] = np.take_along_axis(order, ranks.reshape(-1, 1), axis=1).reshape(out.shape)
        return out
    ranks, positions = ranks.reshape(-1), out.reshape(-1)
    for rank in np.unique(ranks):  # one selection per distinct rank (one for a median without NaNs)
        chosen = ranks == rank
        if chosen.all():
            keys.partition(rank, axis=1)
            positions[...] = keys[:, rank] & _LOW_HALF
        else:
            positions[chosen] = np.partition(keys[chosen], rank, axis=1)[:, rank] & _LOW_HALF
    return out


def argsort_slices(slices, out):
    """out = the stable lexicographic order of the rows of ``slices`` (n, m), m >= 1: first
    column first, NaN last."""
    out[...] = np.lexsort(slices.T[::-1])
    return out


def nonzero(x, out):
    """out (count, ndim) = the coordinates of x's nonzero elements, in C order: one pass over x
    (``np.argwhere`` makes a mask first, then its coordinates)."""
    if x.dtype in HALF_DTYPES:
        out[...] = np.argwhere(x)
    else:
        kernels.search.nonzero_coordinates(np.ascontiguousarray(x).reshape(-1), np.array(x.shape, np.int64), out)
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
