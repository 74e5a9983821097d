"""Dispatch of the reductions of the tensor API: argmax/argmin, variance, logsumexp, cumulative
sums, vector norms, and the gradients of a product and of a full max/min (sums, products and nansums over
axes are :func:`zgrad.kernels.dispatch.reduce_axes`).

The companion of :mod:`zgrad.kernels.dispatch` (its rules hold here). Reductions over any set of
dimensions run as row kernels: the reduced dimensions are moved last and flattened into rows
(a copy only when they are not already last).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from zgrad.kernels.dispatch import (
    _normalize_axes, _reduced_shape, backend_of, cast, contiguous, float_dtype, sum_dtype,
)
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.kernels.promotion import is_floating

__all__ = [
    "Rows", "to_rows", "from_rows", "argmax", "var", "var_backward", "logsumexp", "logsumexp_backward", "distribute_equal",
    "cumsum", "prod_backward", "vector_norm", "vector_norms",
]


class Rows(NamedTuple):
    """An array seen as (kept, reduced) rows, and what it takes to undo that view."""

    rows: Any
    axes: tuple[int, ...]
    moved_shape: tuple[int, ...]
    inverse: tuple[int, ...]


def to_rows(x: Any, dim: Any, floating: bool = True) -> Rows:
    """``x`` with the dimensions ``dim`` (int, tuple, or None for all) moved last and flattened:
    a 2-D C-contiguous (prod(kept), prod(reduced)) array, in ``x``'s floating dtype (in its own
    dtype unless ``floating``).

    Raises:
        IndexError: a dimension is out of range.
    """
    axes = _normalize_axes(dim, x.ndim)
    if floating and not is_floating(x.dtype):
        x = cast(x, float_dtype(x.dtype))
    if len(axes) == x.ndim and x.flags.c_contiguous:  # every dimension, in order: one row, no copy
        return Rows(x.reshape(1, x.size), axes, x.shape, axes)
    perm = [d for d in range(x.ndim) if d not in axes] + list(axes)
    moved = x.transpose(perm)
    count = math.prod(x.shape[d] for d in axes)
    rows = contiguous(moved).reshape(math.prod(moved.shape[:len(moved.shape) - len(axes)]), count)
    return Rows(rows, axes, moved.shape, tuple(sorted(range(len(perm)), key=perm.__getitem__)))  # perm's inverse


def from_rows(rows: Rows, out_rows: Any):
    """``out_rows`` (shaped like ``rows.rows``) back in the original layout of the input."""
    return out_rows.reshape(rows.moved_shape).transpose(rows.inverse)


def argmax(x: Any, dim: int | None, keepdim: bool, largest: bool = True, name: str | None = None):
    """int64 indices of the maximum (``largest``) or minimum along ``dim``, or into the flattened
    array when ``dim`` is None; the first one on ties, a NaN's where there is one. An empty ``x``
    gives empty indices along a non-empty ``dim``, as PyTorch.

    Raises:
        IndexError: a reduction over an empty dimension, or over all of an empty array, with
            PyTorch's text naming ``name`` (default "argmax" / "argmin").
    """
    be = backend_of(x)
    name = name or ("argmax" if largest else "argmin")
    op = be.argmax if largest else be.argmin
    if dim is None:
        if x.size == 0:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0.")
        shape = (1,) * x.ndim if keepdim else ()
        return op(x, None, keepdim, be.empty(shape, np.dtype(np.int64)))
    axes = _normalize_axes(dim, x.ndim)
    axis = axes[0] if x.ndim else None
    out = be.empty(_reduced_shape(x.shape, axes, keepdim), np.dtype(np.int64))
    if x.size == 0:
        if x.shape[axis] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")
        return out  # nothing to reduce: as empty as the other dimensions
    return op(x, axis, keepdim, out)


def extreme_rows(rows: Any, largest: bool):
    """The (R,) max (``largest``) or min of each of the non-empty (R, C) ``rows``, in their dtype;
    NaN where a row holds one."""
    be = backend_of(rows)
    return be.extreme_rows(rows, bool(largest), be.empty((rows.shape[0],), rows.dtype))


def extremes_rows(rows: Any) -> tuple[Any, Any]:
    """The (R,) min and max of each of the non-empty (R, C) ``rows``, in their dtype, in one pass
    where the backend can; NaN where a row holds one."""
    be = backend_of(rows)
    empty = (rows.shape[0],)
    return be.extremes_rows(rows, be.empty(empty, rows.dtype), be.empty(empty, rows.dtype))


def count_nonzero(x: Any, dim: Any, keepdim: bool = False):
    """How many elements of ``x`` are not zero (NaN counts) over ``dim`` (an int, a tuple, or None
    for all), as int64.

    Raises:
        IndexError: a dimension is out of range.
    """
    be = backend_of(x)
    axes = _normalize_axes(dim, x.ndim)
    counts = be.count_nonzero(x, axes, be.empty(_reduced_shape(x.shape, axes, False), np.dtype(np.int64)))
    return counts.reshape(_reduced_shape(x.shape, axes, True)) if keepdim else counts


def var(x: Any, dim: Any, correction: float, keepdim: bool) -> tuple[Any, Rows, Any]:
    """The variance over ``dim`` with divisor max(N - correction, 0); returns (variance, the rows
    it was computed on, their means), the last two for :func:`var_backward`."""
    be = backend_of(x)
    rows = to_rows(x, dim)
    dtype = rows.rows.dtype
    mean = be.empty((rows.rows.shape[0],), dtype)
    result = be.var_rows(rows.rows, correction, mean, be.empty((rows.rows.shape[0],), dtype))
    return result.reshape(_reduced_shape(x.shape, rows.axes, keepdim)), rows, mean


def var_backward(rows: Rows, mean: Any, coef: Any):
    """coef * (x - mean) per row, in the input's layout: the gradient of a variance (coef =
    2 grad / (N - correction)) or standard deviation (coef = grad / (std (N - correction)))."""
    be = backend_of(rows.rows)
    coef = coef.reshape(-1)
    if coef.dtype != rows.rows.dtype:
        coef = cast(coef, rows.rows.dtype)
    out = be.var_backward_rows(rows.rows, mean, contiguous(coef), be.empty(rows.rows.shape, rows.rows.dtype))
    return from_rows(rows, out)


def logsumexp(x: Any, dim: Any, keepdim: bool) -> tuple[Any, Rows]:
    """log(sum(exp(x))) over ``dim``, max-shifted; returns it and the rows it was computed on."""
    be = backend_of(x)
    rows = to_rows(x, dim)
    result = be.logsumexp_rows(rows.rows, be.empty((rows.rows.shape[0],), rows.rows.dtype))
    return result.reshape(_reduced_shape(x.shape, rows.axes, keepdim)), rows


def logsumexp_backward(grad: Any, rows: Rows, result: Any):
    """grad * exp(x - logsumexp(x)) in the input's layout."""
    be = backend_of(grad)
    dtype = rows.rows.dtype
    grad = contiguous(grad if grad.dtype == dtype else cast(grad, dtype)).reshape(-1)
    out = be.logsumexp_backward_rows(grad, rows.rows, result.reshape(-1), be.empty(rows.rows.shape, dtype))
    return from_rows(rows, out)


def distribute_equal(x: Any, value: Any, grad: Any):
    """``grad`` (a scalar) split evenly over the elements of ``x`` equal to ``value``: the
    gradient of a full max or min."""
    be = backend_of(x)
    return be.distribute_equal(x, value, grad, be.empty(x.shape, x.dtype))


def cumsum(x: Any, dim: int, reverse: bool = False, dtype: Any = None):
    """The running sums of ``x`` along ``dim`` (from its end when ``reverse``: the gradient of a
    cumulative sum), in :func:`~zgrad.kernels.dispatch.sum_dtype` (``dtype`` if given).

    Raises:
        IndexError: ``dim`` is out of range (a 0-d array accepts 0 and -1), with PyTorch's message.
    """
    be = backend_of(x)
    axis = normalize_dim(dim, x.ndim)
    out = be.empty(x.shape, sum_dtype(x.dtype, dtype))
    if x.ndim == 0 or x.size == 0:
        return be.copy(x, out)
    return be.cumsum(x, axis, reverse, out)


def prod_backward(x: Any, grad: Any, dim: int | None):
    """``grad`` times the product of the other elements along ``dim`` (None for all), for every
    element of ``x``: the gradient of a product, exact where ``x`` holds zeros."""
    be = backend_of(x, grad)
    rows = to_rows(x, dim)
    dtype = rows.rows.dtype
    grad = contiguous(grad if grad.dtype == dtype else cast(grad, dtype)).reshape(-1)
    out = be.prod_backward_rows(rows.rows, grad, be.empty(rows.rows.shape, dtype))
    return from_rows(rows, out)


def vector_norms(arrays: Sequence[Any], order: float):
    """[:func:`vector_norm` of each of ``arrays``] as one 1-D array, on their backend and in their
    floating dtype (the arrays share both): a backend with ``vector_norms`` takes the list at once
    (CUDA: a launch per group of tensors), others each array into its slot."""
    be = backend_of(*arrays)
    dtype = float_dtype(arrays[0].dtype)
    arrays = [a if a.dtype == dtype else cast(a, dtype) for a in arrays]
    out = be.empty((len(arrays),), dtype)
    if hasattr(be, "vector_norms"):
        return be.vector_norms(arrays, float(order), out)
    for k, a in enumerate(arrays):
        be.vector_norm(a, float(order), out[k:k + 1].reshape(()))
    return out


def vector_norm(x: Any, order: float):
    """The ``order``-norm of all of ``x``'s elements as a 0-d array in its floating dtype, in one
    pass: max |x| (order inf), min |x| (-inf), the count of non-zeros (0), else
    (sum |x|**order) ** (1 / order). An empty ``x`` gives 0 (inf for order -inf); NaN propagates.
    Half dtypes accumulate in float32, as every kernel (see :mod:`zgrad.kernels.half_precision`)."""
    be = backend_of(x)
    dtype = float_dtype(x.dtype)
    if x.dtype != dtype:
        x = cast(x, dtype)
    return be.vector_norm(x, float(order), be.empty((), dtype))
