"""Order statistics: median, nanmedian, quantile, nanquantile and mode.

Each orders the input along the reduced dimension (a stable order, NaNs last: the median by
selection, :func:`zgrad.kernels.dispatch_scan.median_columns`; the others by a sort,
:func:`zgrad.kernels.dispatch_scan.row_order`), works out which element of each row it selects,
and takes those elements differentiably: the gradient goes to the selected elements (quantile's
interpolation splits it between the two it blends), as PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad import return_types
from zgrad.autograd.function import Op
from zgrad.errors import DTypeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_scan
from zgrad.kernels.dispatch import _reduced_shape
from zgrad.kernels.dispatch_reduce import from_rows
from zgrad.ops._args import tensor_arg
from zgrad.tensor import Tensor
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = ["median", "nanmedian", "quantile", "nanquantile", "mode"]


class TakeFromRows(Op):
    """The (R, k) elements rows[r, columns[r, i]] of ``x`` seen as ``rows`` (its
    :class:`~zgrad.kernels.dispatch_reduce.Rows`); the gradient goes back to those elements."""

    @staticmethod
    def forward(ctx, x, rows, columns):
        ctx.layout, ctx.shape = rows._replace(rows=None), rows.rows.shape
        ctx.save_for_backward(columns)
        return dispatch_index.gather(rows.rows, 1, columns)

    @staticmethod
    def backward(ctx, grad):
        (columns,) = ctx.saved_tensors
        return from_rows(ctx.layout, dispatch_index.scatter_add(ctx.shape, grad.dtype, 1, columns, grad)), None, None


def _rows_of(name: str, x: Tensor, dim: Any) -> tuple[Tensor, Any]:
    """(``x``, flattened when ``dim`` is None, its rows along ``dim``).

    Raises:
        IndexError: ``dim`` is out of range, or reduces an empty dimension (PyTorch's message).
    """
    if dim is None:
        x, dim = x.reshape(-1), 0
    rows = dispatch_scan.rows_along(x._data, dim)
    if rows.rows.shape[1] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {rows.axes[0] if rows.axes else 0} to have non-zero size.")
    return x, rows


def _median(name: str, input: Any, dim: Any, keepdim: bool, ignore_nan: bool) -> Any:  # noqa: A002
    x = tensor_arg(input, name)
    if x.dtype == np.bool_:
        raise NotImplementedError(f"\"{name}\" not implemented for 'Bool'")
    if dim is None and x.numel() == 0:  # PyTorch's median of nothing
        return Tensor(dispatch.full((), math.nan, dispatch.float_dtype(x.dtype), x.device.type))
    source, rows = _rows_of(name, x, dim)
    columns = dispatch_scan.median_columns(rows.rows, ignore_nan)
    shape = _reduced_shape(source.shape, rows.axes, keepdim)
    values = TakeFromRows.apply(source, rows, columns).reshape(shape)
    if dim is None:
        return values
    return getattr(return_types, name)(values, Tensor(columns.reshape(shape)))


@accepts_out("exact")
def median(input: Any, dim: int | None = None, keepdim: bool = False) -> Any:  # noqa: A002
    """The median of all elements (a 0-d tensor), or with ``dim`` the ``(values, indices)`` of the
    medians along it: the lower of the two middle values for an even count; NaN (and a NaN's
    index) where there is a NaN. The gradient goes to the selected element.

    Raises:
        IndexError: ``dim`` is out of range or of size 0.
        NotImplementedError: a bool input (PyTorch's error).
    """
    return _median("median", input, dim, keepdim, False)


def nanmedian(input: Any, dim: int | None = None, keepdim: bool = False) -> Any:  # noqa: A002
    """:func:`median` of the elements that are not NaN (NaN where all are).

    Raises:
        IndexError: ``dim`` is out of range or of size 0.
        NotImplementedError: a bool input (PyTorch's error).
    """
    return _median("nanmedian", input, dim, keepdim, True)


def _quantiles(name: str, q: Any, dtype: np.dtype) -> tuple[np.ndarray, bool]:
    """(the quantiles ``q`` as a 1-D float64 host array, whether ``q`` was a scalar).

    Raises:
        DTypeError: a tensor ``q`` of another dtype than the input.
        RuntimeError: a ``q`` of more than one dimension, or a value outside [0, 1] (PyTorch's
            messages).
    """
    if isinstance(q, Tensor):
        if q.dtype != dtype:
            raise DTypeError(f"{name}() q tensor must be same dtype as the input tensor")
        if q.ndim > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        values, scalar = np.asarray(q.cpu()._data, np.float64).reshape(-1), q.ndim == 0
    else:
        values, scalar = np.asarray([float(q)]), True
    bad = values[(values < 0) | (values > 1) | np.isnan(values)]
    if bad.size:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {bad[0]:g}")
    return values, scalar


def _quantile(name: str, input: Any, q: Any, dim: int | None, keepdim: bool,  # noqa: A002
              interpolation: str, ignore_nan: bool) -> Any:
    x = tensor_arg(input, name)
    if x.dtype not in (np.float32, np.float64):
        raise DTypeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in dispatch_scan.INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    values, scalar = _quantiles(name, q, x.dtype)
    if x.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    source, rows = _rows_of(name, x, dim)
    below, above, weight = dispatch_scan.quantile_columns(
        rows.rows, dispatch_scan.row_order(rows.rows), dispatch.asarray(values, np.float64, x.device.type), interpolation, ignore_nan)
    result = TakeFromRows.apply(source, rows, below)
    if above is not None:
        weight = weight if isinstance(weight, float) else Tensor(weight)
        result = result + weight * (TakeFromRows.apply(source, rows, above) - result)
    shape = (1,) * x.ndim if dim is None and keepdim else _reduced_shape(source.shape, rows.axes, keepdim)
    result = result.t().reshape((len(values),) + shape)
    return result.reshape(shape) if scalar else result


@autocast_op()
def quantile(input: Any, q: Any, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear") -> Any:
    """The ``q``-th quantiles (a float or a 0-d/1-D tensor of values in [0, 1]) of all elements or
    along ``dim``; a 1-D ``q`` adds a leading dimension. Between two elements, ``interpolation``
    picks "linear" (the default), "lower", "higher", "midpoint" or "nearest". NaN where a row
    holds a NaN.

    Raises:
        RuntimeError: a non-floating input, a ``q`` of another dtype, out of range or of more than
            one dimension, an empty input, or an unknown ``interpolation`` (PyTorch's messages).
        IndexError: ``dim`` is out of range.
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@autocast_op()
def nanquantile(input: Any, q: Any, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
                interpolation: str = "linear") -> Any:
    """:func:`quantile` of the elements that are not NaN (NaN where all are)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


@accepts_out("exact")
def mode(input: Any, dim: int = -1, keepdim: bool = False) -> Any:  # noqa: A002
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest of equally
    frequent ones) and the index of its last occurrence; the gradient goes to that element.

    Raises:
        IndexError: ``dim`` is out of range or of size 0.
    """
    x = tensor_arg(input, "mode")
    source, rows = _rows_of("mode", x, dim)
    indices = dispatch_scan.mode_columns(rows.rows, dispatch_scan.row_order(rows.rows))
    columns = indices.reshape(-1, 1)
    shape = _reduced_shape(source.shape, rows.axes, keepdim)
    values = TakeFromRows.apply(source, rows, columns).reshape(shape)
    return return_types.mode(values, Tensor(indices.reshape(shape)))
