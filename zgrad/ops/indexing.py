"""Selection by index or mask: gather, index_select, scatter, where, masked_fill, index_put."""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch
from zgrad.kernels import dispatch_index
from zgrad.ops._args import index_arg, index_key, operand, tensor_arg
from zgrad.ops.backward_ops import detached, linear_in_grad
from zgrad.ops.shape import GetItem
from zgrad.tensor import Tensor
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = [
    "gather", "index_select", "scatter", "where", "masked_fill", "index_put", "mask_arg", "scatter_source",
    "source_gradient", "put", "index_select_backward",
]


class Gather(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.save_for_backward(index)
        ctx.shape, ctx.dim = x.shape, dispatch_index.normalize_dim(dim, x.ndim)
        return dispatch_index.gather(x, dim, index)

    @staticmethod
    def backward(ctx, grad):
        index = detached(ctx.saved_tensors[0])
        return linear_in_grad(grad, lambda g: dispatch_index.scatter_add(ctx.shape, g.dtype, ctx.dim, index, g),
                              lambda g: dispatch_index.gather(g, ctx.dim, index)), None, None


class IndexSelect(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.save_for_backward(index)
        ctx.shape, ctx.dim = x.shape, dispatch_index.normalize_dim(dim, x.ndim)
        return dispatch_index.index_select(x, dim, index)

    @staticmethod
    def backward(ctx, grad):
        return index_select_backward(grad, ctx.shape, ctx.dim, detached(ctx.saved_tensors[0])), None, None


def index_select_backward(grad: Any, shape: tuple[int, ...], dim: int, index: Any) -> Any:
    """The gradient reaching the input (of ``shape``) of index_select(dim, index): ``grad``'s slices
    added back at ``index``. Linear in ``grad``, recorded (a tensor ``grad``) with index_select
    as its adjoint."""
    return linear_in_grad(grad, lambda g: dispatch_index.index_select_backward(g, shape, dim, index),
                          lambda g: dispatch_index.index_select(g, dim, index))


class Scatter(Op):
    """A copy of ``x`` with ``src`` (an array or a number) written at ``index`` along ``dim``."""

    @staticmethod
    def forward(ctx, x, dim, index, src):
        out = dispatch.cast(x, x.dtype)
        dispatch_index.scatter(out, dim, index, src)
        ctx.save_for_backward(index)
        ctx.dim = dispatch_index.normalize_dim(dim, x.ndim)
        ctx.src_shape = getattr(src, "shape", None)
        return out

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        gx = gsrc = None
        if ctx.needs_input_grad[0]:  # the overwritten positions pass no gradient back to x
            gx = dispatch_index.scatter(dispatch.cast(grad, grad.dtype), ctx.dim, index, 0)
        if ctx.needs_input_grad[3]:
            gsrc = source_gradient(dispatch_index.gather(grad, ctx.dim, index), index.shape, ctx.src_shape)
        return gx, None, None, gsrc


def put(out: Any, key: Any, value: Any) -> Any:
    """``out[key] = value`` in place; returns ``out``.

    Raises:
        ShapeError: a value that does not broadcast to ``out[key]`` (a RuntimeError, as PyTorch's).
        RuntimeError: ``value`` partly overlaps ``out[key]`` (:func:`dispatch_index.put`).
    """
    try:
        dispatch_index.put(out, key, value)
    except ValueError as error:
        raise ShapeError(str(error)) from error
    return out


def source_gradient(grad: Any, index_shape: tuple[int, ...], src_shape: tuple[int, ...]) -> Any:
    """The gradient of a scatter's ``src`` from ``grad`` of the index's shape: zero in the part of
    a larger ``src`` that the index does not reach."""
    if grad.shape == tuple(src_shape):
        return grad
    return dispatch.slice_backward(grad, tuple(slice(0, n) for n in index_shape), src_shape, grad.dtype)


class IndexPut(Op):
    """A copy of ``x`` with ``value`` written at ``x[index]`` (what ``x[index] = value`` records)."""

    @staticmethod
    def forward(ctx, x, index, value):
        out = put(dispatch.cast(x, x.dtype), index, value)
        ctx.index, ctx.value_shape = index, getattr(value, "shape", None)
        return out

    @staticmethod
    def backward(ctx, grad):
        gx = gvalue = None
        if ctx.needs_input_grad[0]:  # the overwritten positions pass no gradient back to x
            gx = dispatch.cast(grad, grad.dtype)
            gx[ctx.index] = 0
        if ctx.needs_input_grad[2]:
            gvalue = dispatch.sum_to(grad[ctx.index], ctx.value_shape)
        return gx, None, gvalue


class IndexPutAccumulate(Op):
    """``self`` with ``values`` added at ``self[key]``; repeated positions add up."""

    @staticmethod
    def forward(ctx, x, key, values):
        ctx.key, ctx.values_shape = key, getattr(values, "shape", ())
        if not hasattr(values, "shape"):
            values = dispatch.full((), values, x.dtype, dispatch.device_type_of(x))
        spread = dispatch.broadcast_to(dispatch.cast(values, x.dtype), GetItem.select(x, key).shape)
        return dispatch.binary("add", x, dispatch.slice_backward(spread, key, x.shape, x.dtype), dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        gvalues = None
        if ctx.needs_input_grad[2]:
            gvalues = dispatch.sum_to(GetItem.select(grad, ctx.key), ctx.values_shape)
        return grad, None, gvalues


class Where(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, condition, a, b):
        ctx.save_for_backward(condition)
        return dispatch_index.where(condition, a, b)

    @staticmethod
    def backward(ctx, grad):
        (condition,) = ctx.saved_tensors
        ga = _formula_where(condition, grad, 0) if ctx.needs_input_grad[1] else None
        gb = _formula_where(condition, 0, grad) if ctx.needs_input_grad[2] else None
        return None, ga, gb


def _formula_where(condition, a, b):
    """``where`` in a backward formula (recorded when a tensor takes part)."""
    return Where.apply(condition, a, b) if on_graph(a, b) else dispatch_index.where(condition, a, b)


# --- public functions -------------------------------------------------------------------------

def mask_arg(mask: Any, what: str) -> np.ndarray:
    """The bool array of a mask given as a Tensor or an array.

    Raises:
        DTypeError: a mask that is not bool, with PyTorch's message.
    """
    array = mask._data if hasattr(mask, "_data") else np.asarray(mask)
    if array.dtype != np.bool_:
        raise DTypeError(f"{what} only supports boolean masks, but got mask with dtype {array.dtype}")
    return array


def scatter_source(src: Any, value: Any) -> Any:
    """What scatter writes: the ``src`` tensor, or a number (given as ``src`` or ``value``).

    Raises:
        TypeError: neither or both given, or a source that is neither a tensor nor a number.
    """
    if (src is None) == (value is None):
        raise TypeError("scatter(): expected exactly one of src (a Tensor) and value (a number)")
    source = operand(value if src is None else src)
    if not hasattr(source, "_data") and not isinstance(source, (bool, int, float)):
        raise TypeError(f"scatter(): src must be a Tensor or a number, got {type(source).__name__}")
    return source


@accepts_out("exact")
def gather(input: Any, dim: int, index: Any) -> Any:  # noqa: A002 - torch's argument name
    """out[i][j][k] = input[i][index[i][j][k]][k] for dim=1 (likewise for any dim); out has
    index's shape, which may be smaller than input's apart from ``dim``.

    Raises:
        IndexError: an index value outside [0, size). ValueError: mismatched ranks or sizes.
    """
    return Gather.apply(tensor_arg(input, "gather"), dim, index_arg(index, "gather"))


@accepts_out("exact")
def index_select(input: Any, dim: int, index: Any) -> Any:  # noqa: A002
    """The slices of ``input`` along ``dim`` at the positions of the 1-D ``index`` (repeats allowed)."""
    return IndexSelect.apply(tensor_arg(input, "index_select"), dim, index_arg(index, "index_select"))


def scatter(input: Any, dim: int, index: Any, src: Any = None, *, value: Any = None) -> Any:  # noqa: A002
    """A copy of ``input`` with ``src[i][j][k]`` written at ``[i][index[i][j][k]][k]`` (dim=1),
    or ``value`` at every position ``index`` names. Differentiable in ``input`` and ``src``."""
    return Scatter.apply(tensor_arg(input, "scatter"), dim, index_arg(index, "scatter"), scatter_source(src, value))


@accepts_out("exact")
def where(condition: Any, input: Any, other: Any) -> Any:  # noqa: A002
    """``input`` where ``condition`` (bool) is True, else ``other``; all three broadcast together,
    and either value may be a number."""
    return Where.apply(mask_arg(condition, "where"), operand(input), operand(other))


def masked_fill(input: Any, mask: Any, value: Any) -> Any:  # noqa: A002
    """A copy of ``input`` with ``value`` (a number or a 0-d tensor, which then gets a gradient)
    where ``mask`` (bool, broadcast to input) is True.

    Raises:
        ValueError: a value tensor with dimensions.
    """
    x = tensor_arg(input, "masked_fill")
    mask_array = mask_arg(mask, "masked_fill")
    if hasattr(value, "_data"):
        if value.ndim:
            raise ShapeError(f"masked_fill only supports a 0-dimensional value tensor, but got tensor with "
                             f"{value.ndim} dimension(s).")
        value = value.to(x.dtype)
    else:
        value = x.dtype.type(operand(value)).item()  # the value takes the tensor's dtype, as PyTorch
    if mask_array.shape != x.shape and dispatch.broadcast_shape(mask_array.shape, x.shape) != x.shape:
        raise ShapeError(f"masked_fill: mask of shape {list(mask_array.shape)} does not broadcast to the input's "
                         f"shape {list(x.shape)}")
    return Where.apply(mask_array, value, x)


@autocast_op()
def index_put(input: Any, indices: Any, values: Any, accumulate: bool = False) -> Any:  # noqa: A002
    """A copy of ``input`` with ``values`` (a number or a tensor broadcast to ``input[indices]``)
    written at ``input[indices]``, or added there with ``accumulate=True``, where repeated positions
    add up: the out-of-place form of ``input[indices] = values``. ``indices`` is PyTorch's tuple of
    index tensors, or any key ``input[key]`` takes. Differentiable in ``input`` and ``values``.

    Raises:
        ShapeError: values that do not broadcast to ``input[indices]``. IndexError: an index out
            of range.
    """
    if isinstance(indices, list) and any(isinstance(i, Tensor) for i in indices):
        indices = tuple(indices)  # PyTorch's list of index tensors; a list of ints is one integer-array index
    key = index_key(indices)
    return (IndexPutAccumulate if accumulate else IndexPut).apply(tensor_arg(input, "index_put"), key, operand(values))
