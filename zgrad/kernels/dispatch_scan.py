"""Dispatch of the running reductions and order statistics: running products (and their
gradient), running max/min with indices, running logsumexp (and its gradient), stable sorts
along one dimension, the mode, and the sorted positions that medians and quantiles read.

The companion of :mod:`zgrad.kernels.dispatch` (its rules hold here). The dimension worked
along is moved last and the array flattened into C-contiguous rows
(:func:`~zgrad.kernels.dispatch_reduce.to_rows`); results come back in the input's layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.kernels.dispatch import INT64, as_int64, backend_of, binary, cast, contiguous, reduce_sum, sum_dtype
from zgrad.kernels.dispatch_index import gather, normalize_dim, where
from zgrad.kernels.dispatch_pointwise import compare
from zgrad.kernels.dispatch_reduce import Rows, from_rows, to_rows

__all__ = [
    "cumprod", "cumprod_backward", "cumextreme", "logcumsumexp", "logcumsumexp_backward", "rows_along", "row_order", "mode_columns",
    "median_columns", "quantile_columns", "INTERPOLATIONS",
]

INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _rows_like(rows: Rows, a: Any) -> Any:
    """``a`` (shaped like the array ``rows`` came from) as rows in ``rows``' dtype."""
    return to_rows(a if a.dtype == rows.rows.dtype else cast(a, rows.rows.dtype), rows.axes, False).rows


def cumprod(x: Any, dim: int, dtype: Any = None):
    """The running products of ``x`` along ``dim``, in :func:`~zgrad.kernels.dispatch.sum_dtype`
    (``dtype`` if given).

    Raises:
        IndexError: ``dim`` is out of range.
    """
    be = backend_of(x)
    axis = normalize_dim(dim, x.ndim)
    out = be.empty(x.shape, sum_dtype(x.dtype, dtype))
    if x.ndim == 0 or x.size == 0:
        return be.copy(x, out)
    return be.cumprod(x, axis, out)


def cumprod_backward(x: Any, grad: Any, dim: int):
    """The gradient of a running product of ``x`` along ``dim`` (exact where ``x`` holds zeros)."""
    be = backend_of(x, grad)
    rows = to_rows(x, normalize_dim(dim, x.ndim))
    out = be.cumprod_backward_rows(rows.rows, _rows_like(rows, grad), be.empty(rows.rows.shape, rows.rows.dtype))
    return from_rows(rows, out)


def cumextreme(x: Any, dim: int, largest: bool) -> tuple[Any, Any]:
    """(running max (``largest``) or min of ``x`` along ``dim``, int64 index of each), PyTorch's
    cummax/cummin: the latest index on ties, a NaN's once one is seen."""
    be = backend_of(x)
    rows = to_rows(x, normalize_dim(dim, x.ndim), floating=False)
    values = be.empty(rows.rows.shape, x.dtype)
    indices = be.empty(rows.rows.shape, INT64)
    be.cumextreme_rows(rows.rows, largest, values, indices)
    return from_rows(rows, values), from_rows(rows, indices)


def logcumsumexp(x: Any, dim: int) -> tuple[Any, Rows, Any]:
    """(log of the running sums of exp(x) along ``dim``, the rows it was computed on, its rows),
    the last two for :func:`logcumsumexp_backward`."""
    be = backend_of(x)
    rows = to_rows(x, normalize_dim(dim, x.ndim))
    result = be.logcumsumexp_rows(rows.rows, be.empty(rows.rows.shape, rows.rows.dtype))
    return from_rows(rows, result), rows, result


def logcumsumexp_backward(grad: Any, rows: Rows, result: Any):
    """The gradient of :func:`logcumsumexp` in the input's layout."""
    be = backend_of(grad)
    out = be.logcumsumexp_backward_rows(_rows_like(rows, grad), rows.rows, result,
                                        be.empty(rows.rows.shape, rows.rows.dtype))
    return from_rows(rows, out)


def rows_along(x: Any, dim: int) -> Rows:
    """``x`` with ``dim`` moved last as (R, C) rows in its own dtype.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    return to_rows(x, normalize_dim(dim, x.ndim), floating=False)


def row_order(rows: Any):
    """The int64 positions that sort each of the (R, C) ``rows`` ascending: stable, NaNs last."""
    be = backend_of(rows)
    return be.argsort_rows(rows, be.empty(rows.shape, INT64))


def mode_columns(rows: Any, order: Any):
    """The (R,) column of each of the (R, C) ``rows``' most frequent value (the smallest of equally
    frequent ones; its last occurrence), for rows sorted by ``order`` (:func:`row_order`)."""
    be = backend_of(rows)
    values, columns = be.empty((rows.shape[0],), rows.dtype), be.empty((rows.shape[0],), INT64)
    be.mode_rows(contiguous(gather(rows, 1, order)), order, values, columns)
    return columns


def _nan_counts(rows: Any):
    """How many NaNs each of the (R, C) ``rows`` holds, as an (R, 1) int64 array."""
    return reduce_sum(compare("ne", rows, rows), 1, keepdims=True)


def _columns(order: Any, ranks: Any):
    """The columns of the unsorted rows that hold the elements of sorted ``ranks`` (R, k)."""
    return gather(order, 1, contiguous(ranks))


def median_columns(rows: Any, ignore_nan: bool):
    """The (R, 1) column of the median of each of the (R, C) ``rows``: the lower of the two middle
    elements (the first of equal ones in the stable order); a NaN's (the first) where the row has
    one, unless ``ignore_nan``, which takes the median of the other elements (a NaN's where all
    are). Found by selection, without sorting."""
    nans, count = _nan_counts(rows), rows.shape[1]
    if ignore_nan:
        rank = binary("floor_divide", binary("sub", binary("sub", count, nans), 1), 2)
        rank = where(compare("lt", rank, 0), 0, rank)
    else:
        rank = where(compare("gt", nans, 0), binary("sub", count, nans), (count - 1) // 2)
    be = backend_of(rows)
    return be.select_rows(rows, contiguous(as_int64(rank)), be.empty((rows.shape[0], 1), INT64))


def quantile_columns(rows: Any, order: Any, q: Any, interpolation: str, ignore_nan: bool) -> tuple[Any, Any, Any]:
    """(columns below, columns above, weight): the quantiles ``q`` (a 1-D float64 array of values
    in [0, 1]) of each of the (R, C) floating ``rows`` are lerp(row[below], row[above], weight),
    as PyTorch's quantile: rank q (n - 1) among the n non-NaN sorted elements. The columns are
    (R, Q); the weight an (R, Q) array in the rows' dtype ("linear") or 0.5 ("midpoint"); the
    other ``interpolation`` modes (of :data:`INTERPOLATIONS`) pick one element: (columns, None,
    None). A row with a NaN gives NaN, unless ``ignore_nan``, which leaves its NaNs out (a row of
    NaNs still gives NaN)."""
    nans, count = _nan_counts(rows), rows.shape[1]
    rank = binary("mul", q.reshape(1, -1), binary("sub", binary("sub", count, nans), 1), dtype=np.float64)
    if ignore_nan:
        rank = where(compare("lt", rank, 0), 0.0, rank)
    else:
        rank = where(compare("gt", nans, 0), float(count - 1), rank)
    below = binary("floor_divide", rank, 1.0)
    above = where(compare("lt", below, rank), binary("add", below, 1.0), below)
    if interpolation == "nearest":  # round half to even, as torch.round
        fraction = binary("sub", rank, below)
        odd = compare("eq", binary("remainder", below, 2.0), 1.0)
        up = compare("logical_or", compare("gt", fraction, 0.5),
                     compare("logical_and", compare("eq", fraction, 0.5), odd))
        below = where(up, above, below)
    if interpolation in ("lower", "higher", "nearest"):
        return _columns(order, as_int64(above if interpolation == "higher" else below)), None, None
    weight = cast(binary("sub", rank, below), rows.dtype) if interpolation == "linear" else 0.5
    return _columns(order, as_int64(below)), _columns(order, as_int64(above)), weight
