"""Dispatch of sorting and searching: argsort along a dimension, nonzero, searchsorted.

The companion of :mod:`zgrad.kernels.dispatch` (its rules hold here: the backend comes from the
arrays' device, outputs are allocated here, shapes are checked here with PyTorch's messages).
A sort runs on the rows of a C-contiguous (rows, n) copy with the sorted dimension last.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.errors import ShapeError
from zgrad.kernels.dispatch import backend_of, cast, contiguous
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.kernels.promotion import result_type

__all__ = ["argsort", "argsort_slices", "argtopk", "kth_positions", "nonzero", "searchsorted"]

_INT64 = np.dtype(np.int64)


def _positions_along(x: Any, dim: int, width: int, fill: Any):
    """int64 positions along ``dim``, ``width`` of them per slice: ``fill(be, rows, out)`` writes
    (R, width) positions for the C-contiguous (R, n) rows of ``x`` with ``dim`` moved last.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    be = backend_of(x)
    dim = normalize_dim(dim, x.ndim)
    if x.ndim == 0:
        return be.full((), 0, _INT64)
    moved = contiguous(x.swapaxes(dim, -1))
    out = be.empty(moved.shape[:-1] + (width,), _INT64)
    if out.size:
        fill(be, moved.reshape(-1, x.shape[dim]), out.reshape(-1, width))
    return contiguous(out.swapaxes(dim, -1))


def argsort(x: Any, dim: int, descending: bool):
    """int64 positions that sort ``x`` along ``dim`` (stable: equal elements keep their order;
    NaN sorts as the largest value).

    Raises:
        IndexError: ``dim`` is out of range.
    """
    width = x.shape[normalize_dim(dim, x.ndim)] if x.ndim else 1
    return _positions_along(x, dim, width, lambda be, rows, out: be.argsort(rows, bool(descending), out))


def argtopk(x: Any, dim: int, k: int, largest: bool):
    """int64 positions of the ``k`` largest (or smallest) elements of ``x`` along ``dim``, in sorted
    order (NaN the largest; equal values by position): ``argsort(x, dim, largest)``'s first ``k``,
    found without sorting the rest where the backend can.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    return _positions_along(x, dim, k, lambda be, rows, out: be.argtopk(rows, int(k), bool(largest), out))


def kth_positions(x: Any, dim: int, k: int):
    """int64 positions along ``dim`` of the ``k``-th smallest elements (k from 1), size 1 along
    ``dim``: ``argsort(x, dim, False)``'s k-th, found by a selection instead of a sort.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    return _positions_along(x, dim, 1, lambda be, rows, out: be.select_rows(rows, be.full(out.shape, k - 1, _INT64),
                                                                            out))


def argsort_slices(slices: Any):
    """The int64 stable lexicographic order of the rows of the 2-D ``slices`` (NaN sorts as the
    largest value)."""
    be = backend_of(slices)
    out = be.empty((slices.shape[0],), _INT64)
    if slices.shape[1] == 0:  # rows without elements are all equal
        return be.copy(np.arange(slices.shape[0], dtype=np.int64), out) if out.size else out
    if out.size:
        be.argsort_slices(contiguous(slices), out)
    return out


def nonzero(x: Any):
    """The (count, ndim) int64 coordinates of the nonzero elements of ``x``, in C order."""
    be = backend_of(x)
    count = int(be.count_nonzero(x, tuple(range(x.ndim)), be.empty((), _INT64)))
    out = be.empty((count, x.ndim), _INT64)
    if out.size:
        be.nonzero(x, out)
    return out


def searchsorted(sequence: Any, values: Any, right: bool, out_int32: bool):
    """Where each of ``values`` goes in the ascending last dimension of ``sequence`` (1-D, or
    with the leading dimensions of ``values``): int64 (or int32) positions of values' shape.

    Raises:
        ShapeError: leading dimensions that differ, with PyTorch's message.
    """
    be = backend_of(sequence, values)
    if sequence.ndim != 1 and sequence.shape[:-1] != values.shape[:-1]:
        raise ShapeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                         f"of boundaries tensor and input value tensor must match, but we got boundaries tensor "
                         f"{list(sequence.shape)} and input value tensor {list(values.shape)}")
    common = result_type(sequence, values)
    sequence, values = (a if a.dtype == common else cast(a, common) for a in (sequence, values))
    width = sequence.shape[-1] if sequence.ndim else 1
    rows = 1 if sequence.ndim <= 1 else values.size // max(values.shape[-1], 1)
    out = be.empty(values.shape, np.dtype(np.int32 if out_int32 else np.int64))
    if out.size:
        be.searchsorted(contiguous(sequence).reshape(-1, width), contiguous(values).reshape(rows, -1), bool(right),
                        out.reshape(rows, -1))
    return out
