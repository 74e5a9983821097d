"""Counting: unique, unique_consecutive, bincount, histc.

Their results are counts and positions, with no gradient (PyTorch defines none either). Runs of
equal elements are found on the device that holds the tensor: a comparison of neighbours marks
where each run starts, a running sum numbers the runs, and ``nonzero`` lists their starts;
``unique`` does this on a stable sort of the elements.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from zgrad.errors import ShapeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_reduce, dispatch_sort
from zgrad.kernels.dispatch_pointwise import compare
from zgrad.ops._args import refuse_dtype, tensor_arg
from zgrad.tensor import Tensor

__all__ = ["unique", "unique_consecutive", "bincount", "histc"]

_INT64 = np.dtype(np.int64)


def _runs(flat: Any) -> tuple[Any, Any, Any]:
    """(the first element of each run of equal neighbours in the 1-D ``flat``, the int64 run
    number of every element, the int64 length of every run)."""
    device = dispatch.device_type_of(flat)
    if flat.size == 0:
        return flat, dispatch.empty((0,), _INT64, device), dispatch.empty((0,), _INT64, device)
    starts = dispatch.concatenate([dispatch.full((1,), True, np.bool_, device), compare("ne", flat[1:], flat[:-1])], 0)
    run = dispatch.binary("sub", dispatch_reduce.cumsum(starts, 0, dtype=_INT64), 1, dtype=_INT64)
    first = dispatch.contiguous(dispatch_sort.nonzero(starts).reshape(-1))
    ends = dispatch.concatenate([first[1:], dispatch.full((1,), flat.size, _INT64, device)], 0)
    return dispatch_index.index_select(flat, 0, first), run, dispatch.binary("sub", ends, first, dtype=_INT64)


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


def _no_dim(name: str, dim: int | None) -> None:
    if dim is not None:
        raise NotImplementedError(f"{name}(dim=...) is not implemented in zgrad; use dim=None (the flattened tensor)")


def unique(input: Any, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
           dim: int | None = None) -> Any:
    """The distinct elements of ``input`` in ascending order (also with ``sorted=False``, as
    PyTorch's CPU result), and, when asked for, the int64 position of every input element in them
    (input's shape) and how often each occurs.

    Raises:
        NotImplementedError: ``dim`` given (only the flattened form is implemented).
    """
    _no_dim("unique", dim)
    x = tensor_arg(input, "unique")
    flat = dispatch.contiguous(x._data).reshape(-1)
    order = dispatch_sort.argsort(flat, 0, False)
    values, run, counts = _runs(dispatch_index.index_select(flat, 0, order))
    inverse = dispatch_index.scatter(dispatch.empty((flat.size,), _INT64, x.device.type), 0, order, run) \
        if return_inverse else run
    return _results(values, inverse, counts, x.shape, return_inverse, return_counts)


def unique_consecutive(input: Any, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
                       dim: int | None = None) -> Any:
    """``input`` with every run of equal consecutive elements reduced to one (flattened), and, when
    asked for, the int64 run of every input element (input's shape) and each run's length.

    Raises:
        NotImplementedError: ``dim`` given (only the flattened form is implemented).
    """
    _no_dim("unique_consecutive", dim)
    x = tensor_arg(input, "unique_consecutive")
    values, run, counts = _runs(dispatch.contiguous(x._data).reshape(-1))
    return _results(values, run, counts, x.shape, return_inverse, return_counts)


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


def histc(input: Any, bins: int = 100, min: float = 0, max: float = 0) -> Any:  # noqa: A002
    """The histogram of ``input``'s elements in ``bins`` equal-width bins over [min, max] (the
    data's own range when min == max): counts in input's floating dtype; elements outside the
    range (and NaN) are not counted, and ``max`` itself falls in the last bin.

    Raises:
        NotImplementedError: an integer or bool input, as PyTorch's CPU histc.
        RuntimeError: ``bins`` < 1, min > max, or a range that is not finite.
    """
    x = tensor_arg(input, "histc")
    if x.dtype.kind != "f":
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
