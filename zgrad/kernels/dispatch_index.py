"""Dispatch of selection by index or mask: gather, scatter, index_select and where, and the
strided selections of diagonals and sliding windows.

The companion of :mod:`zgrad.kernels.dispatch` (its rules hold here: the backend comes from the
arrays' device, outputs are allocated here, shapes are checked here with PyTorch's messages).
Gathers and scatters along one dimension run on 3-D (outer, dim, inner) views of the arrays,
so one kernel serves every rank and dimension.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad.errors import IndexRangeError, ShapeError
from zgrad.kernels.dispatch import as_int64, backend_of, broadcast_shape, cast, contiguous
from zgrad.kernels.index_keys import is_basic_index
from zgrad.kernels.memory_overlap import check_inplace
from zgrad.kernels.promotion import result_type
from zgrad.kernels.vocabulary import SCATTER_REDUCTIONS

__all__ = [
    "normalize_dim", "check_index_range", "gather", "scatter", "scatter_add", "scatter_reduce_", "index_select",
    "index_select_backward", "index_add_", "where", "masked_fill_", "put", "diagonal_view", "sliding_windows",
]


def normalize_dim(dim: int, ndim: int) -> int:
    """``dim`` in [0, ndim) (a 0-d tensor accepts 0 and -1).

    Raises:
        IndexError: ``dim`` is out of range, with PyTorch's message.
    """
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def check_index_range(index: Any, dim: int, size: int) -> None:
    """Raise IndexRangeError (an IndexError and a RuntimeError, as PyTorch's gather raises) naming
    the first bad value unless every ``index`` value is in [0, size)."""
    if index.size == 0:
        return
    low, high = int(index.min()), int(index.max())
    if low < 0 or high >= size:
        raise IndexRangeError(f"index {low if low < 0 else high} is out of bounds for dimension {dim} with size {size}")


def _three(shape: tuple[int, ...], dim: int) -> tuple[int, int, int]:
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


def _as_3d(a: Any, dim: int):
    return a.reshape(_three(a.shape, dim))


def _region(index_shape: tuple[int, ...], dim: int) -> tuple[slice, ...]:
    """The part of a tensor an index of ``index_shape`` addresses: its extent in every dim but ``dim``."""
    return tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(index_shape))


def _index_array(name: str, index: Any) -> Any:
    if index.dtype.kind not in "iu":
        raise TypeError(f"{name}(): Expected dtype int64 for index, got {index.dtype}")
    return as_int64(index)


def _check_along(name: str, x_shape: tuple[int, ...], dim: int, index: Any, src_shape: tuple[int, ...] | None = None) -> None:
    if index.ndim != len(x_shape):
        raise ShapeError(f"{name}(): Index tensor must have the same number of dimensions as input tensor "
                         f"(index {list(index.shape)}, input {list(x_shape)})")
    for d, n in enumerate(index.shape):
        too_big_src = src_shape is not None and n > src_shape[d]
        if (d != dim and n > x_shape[d]) or too_big_src:
            extra = "" if src_shape is None else f" and to be smaller size than src {list(src_shape)}"
            raise ShapeError(f"{name}(): Expected index {list(index.shape)} to be smaller than self {list(x_shape)} "
                             f"apart from dimension {dim}{extra}")
    check_index_range(index, dim, x_shape[dim])


def gather(x: Any, dim: int, index: Any):
    """out[..., j, ...] = x[..., index[..., j, ...], ...] along ``dim``; out has index's shape.

    Raises:
        IndexError / ValueError / TypeError: bad dim, index values, shapes or index dtype.
    """
    if x.ndim == 0:
        raise ShapeError("gather(): expected a tensor with at least one dimension, got a 0-d tensor")
    be = backend_of(x, index)
    dim = normalize_dim(dim, x.ndim)
    index = _index_array("gather", index)
    _check_along("gather", x.shape, dim, index)
    out = be.empty(index.shape, x.dtype)
    if out.size:
        be.gather(_as_3d(x[_region(index.shape, dim)], dim), _as_3d(index, dim), _as_3d(out, dim))
    return out


def _scatter_into(kernel: str, out: Any, dim: int, region_shape: tuple[int, ...], index3: Any, src3: Any,
                  *options: Any) -> Any:
    """Run a 3-D scatter kernel (with ``options`` before its ``out``) on the part of ``out`` that
    ``region_shape`` covers, through a contiguous copy when that part is a strided view (reshaping
    it to 3-D would copy)."""
    be = backend_of(out)
    region = out[_region(region_shape, dim)]
    target = contiguous(region)
    if index3.size:
        getattr(be, kernel)(index3, src3, *options, _as_3d(target, dim))
    if target is not region:
        be.copy(target, region)
    return out


def _source3(name: str, out: Any, dim: int, index: Any, src: Any) -> Any:
    """Check a scatter's ``index`` against ``out`` and ``src``; the (outer, k, inner) source in
    out's dtype: src's leading part of index's shape, or the scalar ``src`` repeated."""
    src_is_array = hasattr(src, "shape")
    _check_along(name, out.shape, dim, index, src.shape if src_is_array else None)
    shape3 = _three(index.shape, dim)
    if not src_is_array:
        return backend_of(out).full(shape3, src, out.dtype)
    src_part = src[tuple(slice(0, n) for n in index.shape)]
    return contiguous(src_part if src_part.dtype == out.dtype else cast(src_part, out.dtype)).reshape(shape3)


def scatter(out: Any, dim: int, index: Any, src: Any):
    """out[..., index[..., j, ...], ...] = src[..., j, ...] along ``dim``, in place; ``src`` is an
    array (its leading part of index's shape is used) or a scalar.

    Raises:
        IndexError / ValueError / TypeError: bad dim, index values, shapes or index dtype.
    """
    dim = normalize_dim(dim, out.ndim)
    index = _index_array("scatter", index)
    src3 = _source3("scatter", out, dim, index, src)
    return _scatter_into("scatter", out, dim, index.shape, _as_3d(index, dim), src3)


def scatter_reduce_(out: Any, dim: int, index: Any, src: Any, reduce: str, name: str = "scatter_reduce"):
    """out[..., index[..., j, ...], ...] op= src[..., j, ...] along ``dim``, in place, for ``reduce``
    "sum" or one of :data:`~zgrad.kernels.vocabulary.SCATTER_REDUCTIONS`.

    Raises:
        IndexError / ValueError / TypeError: bad dim, index values, shapes or index dtype.
    """
    dim = normalize_dim(dim, out.ndim)
    index = _index_array(name, index)
    src3 = _source3(name, out, dim, index, src)
    if reduce == "sum":
        return _scatter_into("scatter_add", out, dim, index.shape, _as_3d(index, dim), src3)
    code = SCATTER_REDUCTIONS.index(reduce)
    return _scatter_into("scatter_reduce", out, dim, index.shape, _as_3d(contiguous(index), dim), src3, code)


def scatter_add(shape: tuple[int, ...], dtype: Any, dim: int, index: Any, src: Any):
    """A zero array of ``shape`` with ``src`` (index's shape) added at ``index`` along ``dim``:
    the backward of :func:`gather`. ``index`` was checked by the gather it undoes."""
    be = backend_of(src)
    out = be.full(tuple(shape), 0, np.dtype(dtype))
    index = as_int64(index)
    src3 = _as_3d(src if src.dtype == out.dtype else cast(src, out.dtype), dim)
    return _scatter_into("scatter_add", out, dim, index.shape, _as_3d(index, dim), src3)


def index_select(x: Any, dim: int, index: Any):
    """The slices of ``x`` at the positions ``index`` (1-D, or 0-d) lists along ``dim``.

    Raises:
        IndexError / ValueError / TypeError: bad dim, index values, rank or dtype.
    """
    if x.ndim == 0:
        raise ShapeError("index_select(): expected a tensor with at least one dimension, got a 0-d tensor")
    be = backend_of(x, index)
    dim = normalize_dim(dim, x.ndim)
    if index.ndim > 1:
        raise ShapeError(f"index_select(): Index is supposed to be a vector, got shape {list(index.shape)}")
    index = _index_array("index_select", index).reshape(-1)
    check_index_range(index, dim, x.shape[dim])
    shape = x.shape[:dim] + (index.size,) + x.shape[dim + 1:]
    return be.take(x, index, dim, be.empty(shape, x.dtype))


def index_select_backward(grad: Any, shape: tuple[int, ...], dim: int, index: Any):
    """A zero array of ``shape`` with the slices of ``grad`` added at ``index`` along ``dim``
    (repeated positions add up): the backward of :func:`index_select`."""
    return index_add_(backend_of(grad).full(tuple(shape), 0, grad.dtype), dim, index, grad)


def index_add_(out: Any, dim: int, index: Any, src: Any):
    """Add the slices of ``src`` along ``dim`` (``dim`` normalized) to the slices of ``out`` at
    the 1-D ``index`` (checked by the caller), in place; repeated positions add up."""
    be = backend_of(out)
    index = as_int64(index).reshape(-1)
    outer, size, inner = _three(out.shape, dim)
    target = contiguous(out)
    if index.size:
        src = contiguous(src if src.dtype == out.dtype else cast(src, out.dtype))
        be.index_add(index, src.reshape(outer, index.size, inner), target.reshape(outer, size, inner))
    if target is not out:
        be.copy(target, out)
    return out


def where(cond: Any, a: Any, b: Any):
    """a where ``cond`` else b, all broadcast together; dtype as PyTorch promotes a and b."""
    be = backend_of(cond, a, b)
    shape = broadcast_shape(broadcast_shape(getattr(cond, "shape", ()), getattr(a, "shape", ())), getattr(b, "shape", ()))
    return be.where(cond, a, b, be.empty(shape, result_type(a, b)))


def masked_fill_(out: Any, mask: Any, value: Any):
    """out = value where ``mask``, in place (``mask`` broadcast to ``out``)."""
    return backend_of(out, mask).where(mask, value, out, out)


def put(out: Any, key: Any, value: Any) -> None:
    """``out[key] = value`` in place (basic, integer-array or mask ``key``; ``value`` a number or
    an array broadcast to ``out[key]``).

    Raises:
        RuntimeError: ``value`` partly overlaps the view ``out[key]`` of a basic ``key``
            (:func:`memory_overlap.check_inplace`).
        ValueError: a value that does not broadcast to ``out[key]``.
    """
    if getattr(value, "strides", None) is not None and is_basic_index(key):  # a copy into a view of out
        check_inplace(out[key], value)
    out[key] = value


def diagonal_view(x: Any, offset: int, axis1: int, axis2: int) -> Any:
    """A view of the ``offset``-th diagonal of the matrices of ``x`` in ``axis1`` (rows) and
    ``axis2`` (columns), as a last axis, on its device: numpy's ``diagonal``, made writeable (as
    PyTorch's) where ``x`` is."""
    view = x.diagonal(offset, axis1, axis2)
    if isinstance(view, np.ndarray) and x.flags.writeable:
        view.flags.writeable = True
    return view


def sliding_windows(x: Any, axis: int, size: int, step: int, writeable: bool = False) -> Any:
    """A view of the windows of ``size`` elements ``step`` apart along ``axis`` of ``x``, on its
    device: ``axis`` counts the windows, a new last axis holds each (numpy's
    ``sliding_window_view``). Overlapping windows share memory: write through the view only when
    ``step >= size`` (``writeable`` asks numpy for a writeable view)."""
    if isinstance(x, np.ndarray):
        windows = np.lib.stride_tricks.sliding_window_view(x, size, axis, writeable=writeable)
    else:
        windows = x.sliding_window_view(size, axis)
    return windows[(slice(None),) * axis + (slice(None, None, step),)]
