"""Splitting into and joining from pieces along a dim: tensor_split, hsplit / vsplit / dsplit,
hstack / vstack (row_stack) / dstack, column_stack, and ``cat``'s aliases concat and concatenate.

The splits are views (one :class:`~zgrad.ops.shape.Split` op for consecutive pieces, whose
gradient joins the pieces'); the stacks are ``cat`` of the inputs seen with enough dims.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels.dispatch import scalar_type_name
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.ops._args import tensor_arg
from zgrad.ops.functions import cat, getitem, reshape
from zgrad.ops.layout import atleast_1d, atleast_2d, atleast_3d
from zgrad.ops.shape import Split
from zgrad.tensor import Tensor

__all__ = [
    "tensor_split", "hsplit", "vsplit", "dsplit", "hstack", "vstack", "row_stack", "dstack", "column_stack", "concat",
    "concatenate",
]


def _pieces(x: Any, dim: int, bounds: list[tuple[int, int]]) -> tuple[Any, ...]:
    """The slices [start, stop) of ``x`` along ``dim``: one Split op when they follow each other
    from 0 to the end, else one slice each (indices out of order give empty pieces)."""
    size = x.shape[dim]
    if bounds[0][0] == 0 and bounds[-1][1] == size and all(a[1] == b[0] for a, b in zip(bounds, bounds[1:])):
        pieces = Split.apply(x, tuple(stop - start for start, stop in bounds), dim)
        return pieces if isinstance(pieces, tuple) else (pieces,)
    lead = (slice(None),) * dim
    return tuple(getitem(x, lead + (slice(start, stop),)) for start, stop in bounds)


def _split_points(indices_or_sections: Any) -> Any:
    """An int of sections or a tuple of indices, from an int, a sequence or an integer tensor.

    Raises:
        DTypeError: a tensor that is not an int64 one. ShapeError: a tensor of 2 or more dims.
    """
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.dtype != np.int64:
            raise DTypeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                             f"{scalar_type_name(indices_or_sections.dtype)}")
        if indices_or_sections.ndim > 1:
            raise ShapeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                             f"one-dimensional tensor, but got a tensor with {indices_or_sections.ndim} dims")
        points = indices_or_sections._host()
        return int(points) if points.ndim == 0 else tuple(int(i) for i in points)
    if isinstance(indices_or_sections, (int, np.integer)):
        return int(indices_or_sections)
    return tuple(int(i) for i in indices_or_sections)


def tensor_split(input: Any, indices_or_sections: Any, dim: int = 0) -> tuple[Any, ...]:  # noqa: A002
    """Views of ``input`` split along ``dim``: into ``n`` pieces of nearly equal size (an int;
    the first ``size % n`` pieces are one longer), or at the given indices (a sequence or a 1-D
    integer tensor; ``[2, 5]`` gives ``[:2]``, ``[2:5]``, ``[5:]``).

    Raises:
        ShapeError: a 0-d input, or fewer than 1 section. IndexError: ``dim`` is out of range.
    """
    x = tensor_arg(input, "tensor_split")
    if x.ndim == 0:
        raise ShapeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    dim = normalize_dim(dim, x.ndim)
    size = x.shape[dim]
    points = _split_points(indices_or_sections)
    if isinstance(points, int):
        if points < 1:
            raise ShapeError(f"number of sections must be larger than 0, got {points}")
        lengths = [size // points + (i < size % points) for i in range(points)]
        starts = np.cumsum([0] + lengths)
        bounds = [(int(a), int(b)) for a, b in zip(starts, starts[1:])]
    else:
        edges = [0, *points, size]
        bounds = [slice(a, b).indices(size)[:2] for a, b in zip(edges, edges[1:])]
        bounds = [(start, max(start, stop)) for start, stop in bounds]
    return _pieces(x, dim, bounds)


def _split_along(x: Any, indices_or_sections: Any, dim: int, what: str) -> tuple[Any, ...]:
    if isinstance(indices_or_sections, Tensor):
        raise TypeError(f"{what}() expects an int or a sequence of ints, got a Tensor")
    points = _split_points(indices_or_sections)
    if isinstance(points, int):
        size = x.shape[dim]
        if points == 0 or size % points:
            raise ShapeError(f"torch.{what} attempted to split along dimension {dim}, but the size of the dimension "
                             f"{size} is not divisible by the split_size {points}!")
    return tensor_split(x, points, dim)


def hsplit(input: Any, indices_or_sections: Any) -> tuple[Any, ...]:  # noqa: A002
    """:func:`tensor_split` along dim 1 (dim 0 of a 1-D tensor); an int must divide that dim.

    Raises:
        ShapeError: a 0-d input, or sections that do not divide the dim. TypeError: a tensor of
            indices (PyTorch takes ints only here).
    """
    x = tensor_arg(input, "hsplit")
    if x.ndim < 1:
        raise ShapeError("torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with 0 "
                         "dimensions!")
    return _split_along(x, indices_or_sections, 1 if x.ndim > 1 else 0, "hsplit")


def vsplit(input: Any, indices_or_sections: Any) -> tuple[Any, ...]:  # noqa: A002
    """:func:`tensor_split` along dim 0 of a tensor of 2 or more dims; an int must divide it.

    Raises:
        ShapeError: fewer than 2 dims, or sections that do not divide the dim. TypeError: a
            tensor of indices.
    """
    x = tensor_arg(input, "vsplit")
    if x.ndim < 2:
        raise ShapeError(f"torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with {x.ndim} "
                         f"dimensions!")
    return _split_along(x, indices_or_sections, 0, "vsplit")


def dsplit(input: Any, indices_or_sections: Any) -> tuple[Any, ...]:  # noqa: A002
    """:func:`tensor_split` along dim 2 of a tensor of 3 or more dims; an int must divide it.

    Raises:
        ShapeError: fewer than 3 dims, or sections that do not divide the dim. TypeError: a
            tensor of indices.
    """
    x = tensor_arg(input, "dsplit")
    if x.ndim < 3:
        raise ShapeError(f"torch.dsplit requires a tensor with at least 3 dimension, but got a tensor with {x.ndim} "
                         f"dimensions!")
    return _split_along(x, indices_or_sections, 2, "dsplit")


def _joined(tensors: Sequence[Any], what: str, at_least: Any, dim: Any) -> Any:
    if not tensors:
        raise ShapeError(f"{what} expects a non-empty TensorList")
    parts = at_least(*(tensor_arg(t, what) for t in tensors))
    parts = parts if isinstance(parts, tuple) else (parts,)
    return cat(parts, dim(parts[0]))


def hstack(tensors: Sequence[Any]) -> Any:
    """``tensors`` joined column-wise: along dim 1, or dim 0 for 1-D tensors (0-d ones count as 1-D).

    Raises:
        ShapeError: an empty sequence, or shapes that do not fit together.
    """
    return _joined(tensors, "hstack", atleast_1d, lambda first: 0 if first.ndim == 1 else 1)


def vstack(tensors: Sequence[Any]) -> Any:
    """``tensors`` joined row-wise, along dim 0, after seeing each with at least 2 dims (a 1-D
    tensor as a row).

    Raises:
        ShapeError: an empty sequence, or shapes that do not fit together.
    """
    return _joined(tensors, "vstack", atleast_2d, lambda first: 0)


row_stack = vstack


def dstack(tensors: Sequence[Any]) -> Any:
    """``tensors`` joined depth-wise, along dim 2, after seeing each with at least 3 dims.

    Raises:
        ShapeError: an empty sequence, or shapes that do not fit together.
    """
    return _joined(tensors, "dstack", atleast_3d, lambda first: 2)


def column_stack(tensors: Sequence[Any]) -> Any:
    """``tensors`` as columns side by side: 0-d and 1-d tensors become (n, 1) columns, the others
    join along dim 1.

    Raises:
        ShapeError: an empty sequence, or shapes that do not fit together.
    """
    return _joined(tensors, "column_stack",
                   lambda *ts: tuple(reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in ts),
                   lambda first: 1)


def concat(tensors: Sequence[Any], dim: int = 0) -> Any:
    """``cat``: ``tensors`` joined along the existing dim ``dim``."""
    return cat(tensors, dim)


def concatenate(tensors: Sequence[Any], axis: int = 0) -> Any:
    """``cat``: ``tensors`` joined along the existing dim ``axis`` (numpy's argument name)."""
    return cat(tensors, axis)
