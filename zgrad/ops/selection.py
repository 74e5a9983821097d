"""Selection by flat position, by mask and by a dimension's index: take, take_along_dim,
masked_select, masked_scatter, nonzero, argwhere.

Each is written with the indexing ops (``x[key]``, gather, index_put), so their gradients come
with them: a repeated position adds up its gradients, and a position overwritten by
``masked_scatter`` passes none back to ``self``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch, dispatch_index, dispatch_sort
from zgrad.kernels.dispatch_pointwise import compare
from zgrad.ops._args import index_arg, tensor_arg
from zgrad.ops.functions import getitem, reshape
from zgrad.ops.indexing import IndexPut, gather, index_select, mask_arg
from zgrad.ops.shape import expand
from zgrad.tensor import Tensor
from zgrad.ops.out_argument import accepts_out

__all__ = ["take", "take_along_dim", "masked_select", "masked_scatter", "nonzero", "argwhere"]


def _wrapped(index: Any, size: int) -> Any:
    """``index`` with negative values counted from the end (int64).

    Raises:
        IndexError: a value outside [-size, size), with PyTorch's message.
    """
    index = dispatch.as_int64(index)
    if index.size:
        low, high = int(index.min()), int(index.max())
        if low < -size or high >= size:
            bad = low if low < -size else high
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {size} elements.")
        if low < 0:
            index = dispatch_index.where(compare("lt", index, 0), dispatch.binary("add", index, size), index)
    return index


@accepts_out("exact")
def take(input: Any, index: Any) -> Any:  # noqa: A002
    """The elements of ``input``, read as 1-D, at ``index`` (any shape; negative values count
    from the end); the result has index's shape.

    Raises:
        IndexError: an index outside the tensor.
    """
    x = tensor_arg(input, "take")
    positions = _wrapped(index_arg(index, "take"), x.numel())
    return reshape(index_select(reshape(x, (-1,)), 0, Tensor(positions.reshape(-1))), positions.shape)


def take_along_dim(input: Any, indices: Any, dim: int | None = None) -> Any:  # noqa: A002
    """``input``'s elements at ``indices`` along ``dim`` (gather, with input and indices broadcast
    together in every other dimension; negative indices count from the end); with ``dim=None``,
    ``take`` of the flattened tensors.

    Raises:
        IndexError: a bad ``dim`` or index. ShapeError: ranks that differ.
    """
    x = tensor_arg(input, "take_along_dim")
    index = index_arg(indices, "take_along_dim")
    if dim is None:
        return take(reshape(x, (-1,)), index.reshape(-1))
    dim = dispatch_index.normalize_dim(dim, x.ndim)
    if index.ndim != x.ndim:
        raise ShapeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, but "
                         f"got {x.ndim} dimensions for input, and {index.ndim} dimensions for indices")
    size = x.shape[dim] if x.ndim else 1
    index = _wrapped(index, size)
    shape = list(dispatch.broadcast_shape(tuple(1 if d == dim else n for d, n in enumerate(x.shape)),
                                          tuple(1 if d == dim else n for d, n in enumerate(index.shape))))
    x_shape, index_shape = list(shape), list(shape)
    x_shape[dim], index_shape[dim] = size, index.shape[dim]
    spread = dispatch.contiguous(dispatch.broadcast_to(index, tuple(index_shape)))
    source = x if list(x.shape) == x_shape else expand(x, tuple(x_shape))
    return gather(source, dim, Tensor(spread))


def _broadcast_mask(x: Any, mask: np.ndarray) -> tuple[Any, Any]:
    """x and the bool ``mask`` broadcast together: (x, mask) of one shape."""
    shape = dispatch.broadcast_shape(x.shape, mask.shape)
    x = x if x.shape == shape else expand(x, shape)
    return x, mask if mask.shape == shape else dispatch.broadcast_to(mask, shape)


@accepts_out("exact")
def masked_select(input: Any, mask: Any) -> Any:  # noqa: A002
    """The 1-D tensor of the elements of ``input`` where the bool ``mask`` is True (the two
    broadcast together), in C order.

    Raises:
        DTypeError: a mask that is not bool.
    """
    x = tensor_arg(input, "masked_select")
    x, mask_array = _broadcast_mask(x, mask_arg(mask, "masked_select"))
    return getitem(x, dispatch.contiguous(mask_array))


def masked_scatter(input: Any, mask: Any, source: Any) -> Any:  # noqa: A002
    """A copy of ``input`` with the first elements of ``source`` (in C order) written where the
    bool ``mask`` (broadcast to input) is True, one after another. Differentiable in ``input`` and
    ``source``.

    Raises:
        DTypeError: a mask that is not bool. ShapeError: a mask that does not broadcast to input,
            or fewer source elements than True mask elements.
    """
    x = tensor_arg(input, "masked_scatter")
    src = tensor_arg(source, "masked_scatter", "source")
    if src.dtype != x.dtype:
        raise DTypeError(f"masked_scatter_: expected self and source to have same dtypes but got {x.dtype} and "
                         f"{src.dtype}")
    mask_array = mask_arg(mask, "masked_scatter")
    if dispatch.broadcast_shape(x.shape, mask_array.shape) != x.shape:
        raise ShapeError(f"masked_scatter: mask of shape {list(mask_array.shape)} does not broadcast to the input's "
                         f"shape {list(x.shape)}")
    mask_array = dispatch.contiguous(dispatch.broadcast_to(mask_array, x.shape))
    count = int(dispatch.reduce_sum(mask_array, dtype=np.int64))
    if src.numel() < count:
        raise ShapeError("Number of elements of source < number of ones in mask")
    values = getitem(reshape(src, (-1,)), slice(0, count))
    return IndexPut.apply(x, mask_array, values)


@accepts_out("exact")
def nonzero(input: Any, *, as_tuple: bool = False) -> Any:  # noqa: A002
    """The int64 coordinates of the nonzero elements of ``input``, in C order: a (count, ndim)
    tensor, or with ``as_tuple=True`` one 1-D tensor per dimension (a 0-d input counts as 1-D)."""
    x = tensor_arg(input, "nonzero")
    if not as_tuple:
        return Tensor(dispatch_sort.nonzero(x._data))
    data = x._data if x.ndim else x._data.reshape(1)
    coordinates = dispatch_sort.nonzero(data)
    return tuple(Tensor(dispatch.contiguous(coordinates[:, d])) for d in range(data.ndim))


def argwhere(input: Any) -> Any:  # noqa: A002
    """The (count, ndim) int64 coordinates of the nonzero elements of ``input``: ``nonzero(input)``."""
    return nonzero(input)
