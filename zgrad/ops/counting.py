"""Counting: unique, unique_consecutive, bincount, histc.

Their results are counts and positions, with no gradient (PyTorch defines none either). Runs of
equal elements are found on the device that holds the tensor: a comparison of neighbours marks
where each run starts, a running sum numbers the runs, and ``nonzero`` lists their starts;
``unique`` does this on a stable sort of the elements (lexicographic, of the slices with ``dim``).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from zgrad import return_types
from zgrad.errors import ShapeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_reduce, dispatch_sort
from zgrad.kernels.dispatch_pointwise import compare
from zgrad.ops._args import refuse_dtype, tensor_arg
from zgrad.tensor import Tensor
from zgrad.kernels.promotion import is_floating
from zgrad.ops.out_argument import accepts_out

__all__ = ["unique", "unique_consecutive", "bincount", "histc", "histogram"]

_INT64 = np.dtype(np.int64)


def _slices(x: Any, dim: int | None) -> tuple[Any, Callable[[Any], Any], tuple[int, ...]]:
    """x's data as a C-contiguous (n, m) matrix whose rows are its slices along ``dim`` (its
    elements when ``dim`` is None); a function that turns kept rows back into slices of x; the
    shape of the inverse."""
    data = x._data
    if dim is None:
        return dispatch.contiguous(data).reshape(-1, 1), lambda rows: rows.reshape(-1), x.shape
    dim = dispatch_index.normalize_dim(dim, x.ndim)
    axes = (dim, *(d for d in range(x.ndim) if d != dim))
    moved = dispatch.contiguous(data.transpose(axes))
    rest = moved.shape[1:]

    def back(rows: Any) -> Any:
        return dispatch.contiguous(rows.reshape((rows.shape[0], *rest)).transpose(tuple(np.argsort(axes))))
    return moved.reshape(moved.shape[0], -1), back, (x.shape[dim],)


def _runs(rows: Any) -> tuple[Any, Any, Any]:
    """(the first row of each run of equal neighbouring rows of the 2-D ``rows``, the int64 run
    number of every row, the int64 length of every run)."""
    device = dispatch.device_type_of(rows)
    if rows.shape[0] == 0:
        return rows, dispatch.empty((0,), _INT64, device), dispatch.empty((0,), _INT64, device)
    differs = dispatch.reduce_sum(compare("ne", rows[1:], rows[:-1]), axis=1, dtype=_INT64)
    starts = dispatch.concatenate([dispatch.full((1,), True, np.bool_, device), compare("gt", differs, 0)], 0)
    run = dispatch.binary("sub", dispatch_reduce.cumsum(starts, 0, dtype=_INT64), 1, dtype=_INT64)
    first = dispatch.contiguous(dispatch_sort.nonzero(starts).reshape(-1))
    ends = dispatch.concatenate([first[1:], dispatch.full((1,), rows.shape[0], _INT64, device)], 0)
    return dispatch_index.index_select(rows, 0, first), run, dispatch.binary("sub", ends, first, dtype=_INT64)


def _results(values: Any, inverse: Any, counts: Any, shape: tuple[int, ...], return_inverse: bool,
             return_counts: bool) -> Any:
    """``values``, or the tuple PyTorch returns with the inverse (of ``shape``) and counts asked for."""
    if not (return_inverse or return_counts):
        return Tensor(values)
    results = [Tensor(values)]
    if return_inverse:
        results.append(Tensor(inverse.reshape(shape)))
    if return_counts:
        results.append(Tensor(counts))
    return tuple(results)


def unique(input: Any, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
           dim: int | None = None) -> Any:
    """The distinct elements of ``input`` in ascending order (also with ``sorted=False``, as
    PyTorch's CPU result), or with ``dim`` its distinct slices along ``dim`` in lexicographic
    order; and, when asked for, the int64 position in them of every input element (input's
    shape) or slice, and how often each occurs.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    x = tensor_arg(input, "unique")
    rows, back, inverse_shape = _slices(x, dim)
    order = dispatch_sort.argsort_slices(rows)
    values, run, counts = _runs(dispatch_index.index_select(rows, 0, order))
    inverse = dispatch_index.scatter(dispatch.empty((rows.shape[0],), _INT64, x.device.type), 0, order, run) \
        if return_inverse else run
    return _results(back(values), inverse, counts, inverse_shape, return_inverse, return_counts)


def unique_consecutive(input: Any, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
                       dim: int | None = None) -> Any:
    """``input`` with every run of equal consecutive elements (flattened; with ``dim``, of equal
    consecutive slices along ``dim``) reduced to one, and, when asked for, the int64 run of every
    input element (input's shape) or slice, and each run's length.

    Raises:
        IndexError: ``dim`` is out of range.
    """
    x = tensor_arg(input, "unique_consecutive")
    rows, back, inverse_shape = _slices(x, dim)
    values, run, counts = _runs(rows)
    return _results(back(values), run, counts, inverse_shape, return_inverse, return_counts)


def bincount(input: Any, weights: Any = None, minlength: int = 0) -> Any:  # noqa: A002
    """How often each value 0..max occurs in the 1-D non-negative integer ``input`` (at least
    ``minlength`` bins): int64 counts, or with ``weights`` (input's shape) the sum of the weights
    of each value, float32 for float32 weights and float64 otherwise.

    Raises:
        ShapeError: input is not 1-D or holds a negative value, or weights of another shape.
        NotImplementedError: input is not integral, as PyTorch. ValueError: a negative ``minlength``.
    """
    x = tensor_arg(input, "bincount")
    if minlength < 0:
        raise ValueError("minlength should be >= 0")
    if x.dtype.kind not in "iu":
        raise refuse_dtype("bincount_cpu", x.dtype)
    if x.ndim != 1:
        raise ShapeError("bincount only supports 1-d non-negative integral inputs.")
    bins = minlength
    if x.numel():
        low, high = builtins.int(x._data.min()), builtins.int(x._data.max())
        if low < 0:
            raise ShapeError("bincount only supports 1-d non-negative integral inputs.")
        bins = builtins.max(bins, high + 1)
    if weights is None:
        dtype, source = _INT64, 1
    else:
        w = tensor_arg(weights, "bincount", "weights")
        if w.shape != x.shape:
            raise ShapeError("weights should be 1-d and have the same length as input")
        dtype = np.dtype(np.float32 if w.dtype == np.float32 else np.float64)
        source = dispatch.cast(w._data, dtype)
    counts = dispatch.full((bins,), 0, dtype, x.device.type)
    if x.numel():
        dispatch_index.scatter_reduce_(counts, 0, x._data, source, "sum", "bincount")
    return Tensor(counts)


def _histogram_range(x: Any, low: float, high: float) -> tuple[float, float]:
    """PyTorch's range of histc: [min, max] as given, the data's when both are equal (0 and 0
    by default), widened by 1 on each side when that is a single point.

    Raises:
        RuntimeError: min > max, or a range that is not finite.
    """
    if low > high:
        raise RuntimeError("torch.histc: max must be larger than min")
    if low == high and x.size:
        low, high = builtins.float(x.min()), builtins.float(x.max())
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"torch.histc: range of [{low}, {high}] is not finite")
    if low == high:
        low, high = low - 1, high + 1
    return low, high


@accepts_out("exact")
def histc(input: Any, bins: int = 100, min: float = 0, max: float = 0) -> Any:  # noqa: A002
    """The histogram of ``input``'s elements in ``bins`` equal-width bins over [min, max] (the
    data's own range when min == max): counts in input's floating dtype; elements outside the
    range (and NaN) are not counted, and ``max`` itself falls in the last bin.

    Raises:
        NotImplementedError: an integer or bool input, as PyTorch's CPU histc.
        RuntimeError: ``bins`` < 1, min > max, or a range that is not finite.
    """
    x = tensor_arg(input, "histc")
    if not is_floating(x.dtype):
        raise refuse_dtype("histogram_cpu", x.dtype)
    if bins < 1:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dim 0")
    data = dispatch.contiguous(x._data).reshape(-1)
    low, high = _histogram_range(data, builtins.float(min), builtins.float(max))
    inside = compare("logical_and", compare("ge", data, low), compare("le", data, high))
    clipped = dispatch_index.where(inside, data, low)
    scaled = dispatch.binary("div", dispatch.binary("mul", dispatch.binary("sub", clipped, low, dtype=x.dtype), bins,
                                                    dtype=x.dtype), high - low, dtype=x.dtype)
    position = dispatch.binary("minimum", dispatch.cast(scaled, _INT64), bins - 1, dtype=_INT64)
    counts = dispatch.full((bins,), 0, x.dtype, x.device.type)
    dispatch_index.scatter_reduce_(counts, 0, position, dispatch.cast(inside, x.dtype), "sum", "histc")
    return Tensor(counts)


def histogram(input: Any, bins: Any = 100, *, range: Any = None, weight: Any = None,  # noqa: A002
              density: bool = False) -> Any:
    """The histogram of ``input``'s elements: ``bins`` equal-width bins over ``range`` (the data's
    own range by default) or the bins between the ascending edges of a 1-d tensor ``bins``;
    elements are counted (or their ``weight`` summed) per bin, the last bin including its right
    edge; ``density`` divides by the total and the bin widths. Returns ``(hist, bin_edges)`` in
    ``input``'s floating dtype, computed on the host (no gradient, as PyTorch's).

    Raises:
        NotImplementedError: an ``input`` neither float32 nor float64 (PyTorch's message).
    """
    x = tensor_arg(input, "histogram")
    if x.dtype not in (np.float32, np.float64):
        raise NotImplementedError(f'"histogramdd" not implemented for \'{dispatch.scalar_type_name(x.dtype)}\'')
    data = x._host().astype(np.float64).reshape(-1)
    edges = bins._host().astype(np.float64) if isinstance(bins, Tensor) else int(bins)
    weights = None if weight is None else tensor_arg(weight, "histogram", "weight")._host().astype(np.float64).reshape(-1)
    hist, bin_edges = np.histogram(data, edges, range=range, weights=weights, density=density)
    device = x.device.type
    return return_types.histogram(Tensor(dispatch.asarray(hist, x.dtype, device)),
                                  Tensor(dispatch.asarray(bin_edges, x.dtype, device)))
