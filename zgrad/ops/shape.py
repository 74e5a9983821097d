"""Layout ops: reshape, permute, slicing, stack, cat, expand, split, and the layout functions
built on them (flatten, squeeze, unsqueeze, chunk, t)."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from zgrad.autograd.function import Op, on_graph
from zgrad.errors import ShapeError
from zgrad.kernels import dispatch
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.ops._args import tensor_arg
from zgrad.tensor import Tensor


class Reshape(Op):
    returns_view = True
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        try:
            return x.reshape(shape)
        except ValueError:
            raise _invalid_shape(shape, x.size) from None

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape), None


class Permute(Op):
    returns_view = True
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, dims):
        if len(dims) != x.ndim:
            raise ShapeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                             f"of the desired ordering of dimensions i.e. input.dim() = {x.ndim} is not equal to "
                             f"len(dims) = {len(dims)}")
        dims = tuple(normalize_dim(d, x.ndim) for d in dims)
        if len(set(dims)) != len(dims):
            raise ShapeError("permute(): duplicate dims are not allowed.")
        ctx.inverse = tuple(np.argsort(dims))
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, grad):
        return (Permute.apply(grad, ctx.inverse) if on_graph(grad) else grad.transpose(ctx.inverse)), None


class GetItem(Op):
    returns_view = True
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, index):
        ctx.shape, ctx.dtype, ctx.index = x.shape, x.dtype, index
        return GetItem.select(x, index)

    @staticmethod
    def select(x, index):
        """``x[index]``: a view for basic indices, a copy for integer arrays."""
        out = x[index]
        if isinstance(out, np.generic):
            # A full integer index gives a numpy scalar; with a trailing Ellipsis numpy gives a 0-d
            # view instead, so that writes through it reach x (as through PyTorch's views).
            out = x[(*index, Ellipsis) if isinstance(index, tuple) else (index, Ellipsis)]
        return out

    @staticmethod
    def backward(ctx, grad):
        if on_graph(grad):
            return GetItemBackward.apply(grad, ctx.index, ctx.shape, ctx.dtype), None
        return dispatch.slice_backward(grad, ctx.index, ctx.shape, ctx.dtype), None


class GetItemBackward(Op):
    """GetItem's backward as an op of its own (zeros of the input's shape, the gradient at
    ``index``), recorded in a pass with create_graph=True; its own backward is ``grad[index]``."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, grad, index, shape, dtype):
        ctx.index = index
        return dispatch.slice_backward(grad, index, shape, dtype)

    @staticmethod
    def backward(ctx, grad):
        selected = GetItem.apply(grad, ctx.index) if on_graph(grad) else GetItem.select(grad, ctx.index)
        return selected, None, None, None


class Stack(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, dim, *xs):
        ctx.dim = dim % (xs[0].ndim + 1)
        return dispatch.stack(xs, dim)

    @staticmethod
    def backward(ctx, grad):
        lead = (slice(None),) * ctx.dim
        return (None, *(grad[lead + (i,)] for i in range(grad.shape[ctx.dim])))


class Cat(Op):
    differentiable_backward = True

    @staticmethod
    def forward(ctx, dim, *xs):
        out = dispatch.concatenate(xs, dim)
        ctx.dim = dim % xs[0].ndim
        ctx.sizes = [x.shape[ctx.dim] for x in xs]
        return out

    @staticmethod
    def backward(ctx, grad):
        lead = (slice(None),) * ctx.dim
        parts, start = [], 0
        for size in ctx.sizes:
            parts.append(grad[lead + (slice(start, start + size),)])
            start += size
        return (None, *parts)


class View(Op):
    """A reshape that never copies: its result shares ``x``'s memory, as PyTorch's ``view``."""

    returns_view = True
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        try:
            return x.reshape(shape, copy=False)
        except ValueError:
            if not _fits(x.size, shape):
                raise _invalid_shape(shape, x.size) from None
            raise ShapeError("view size is not compatible with input tensor's size and stride (at least one dimension "
                             "spans across two contiguous subspaces). Use .reshape(...) instead.") from None

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape), None


def _invalid_shape(shape: tuple[int, ...], size: int) -> ShapeError:
    return ShapeError(f"shape '{list(shape)}' is invalid for input of size {size}")


def _fits(size: int, shape: tuple[int, ...]) -> bool:
    """Whether ``shape`` (with at most one -1) can hold ``size`` elements."""
    known = math.prod(n for n in shape if n != -1)
    if list(shape).count(-1) > 1:
        return False
    return known == size if -1 not in shape else (known > 0 and size % known == 0) or (known == 0 and size == 0)


class LaidOut(Op):
    """A copy of ``x`` with its elements in memory in ``order`` (dims outermost first): a
    transposed or channels-last clone; the gradient passes as it is."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, order):
        inverse = tuple(sorted(range(len(order)), key=order.__getitem__))
        return dispatch.cast(x.transpose(order), x.dtype).transpose(inverse)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Expand(Op):
    """A read-only broadcast view; the engine sums the gradient back to the input's shape."""

    returns_view = True
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, shape):
        return dispatch.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Split(Op):
    """Views of consecutive pieces along ``dim``; the gradient is the pieces' gradients joined."""

    returns_view = True
    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, sizes, dim):
        ctx.dim = dim
        lead = (slice(None),) * dim
        starts = np.cumsum((0,) + tuple(sizes[:-1]))
        return tuple(x[lead + (slice(int(start), int(start) + size),)] for start, size in zip(starts, sizes))

    @staticmethod
    def backward(ctx, *grads):
        if on_graph(*grads):
            return Cat.apply(ctx.dim, *grads), None, None
        return dispatch.concatenate(grads, ctx.dim), None, None


# --- public functions -------------------------------------------------------------------------

def _dim(dim: int, ndim: int) -> int:
    return normalize_dim(dim, ndim)


def view(input: Any, shape: Sequence[int]) -> Any:  # noqa: A002 - torch's argument name
    """``input`` seen with another shape, sharing its memory (-1 infers one size).

    Raises:
        ShapeError: the shape does not fit the number of elements, or the layout needs a copy
            (then use reshape), with PyTorch's message.
    """
    return View.apply(tensor_arg(input, "view"), tuple(int(n) for n in shape))


def view_dtype(input: Any, dtype: Any) -> Tensor:  # noqa: A002 - torch's argument name
    """``input``'s memory read as ``dtype`` (PyTorch's ``Tensor.view(dtype)``): the same bytes, the
    last dimension scaled by the ratio of the element sizes. As in PyTorch, the result does not
    require grad (bits reinterpreted have no gradient).

    Raises:
        ShapeError: the element sizes differ and the tensor is 0-d, its last dimension is not
            contiguous, or its last size, storage offset or other strides do not divide by the
            ratio of the sizes (PyTorch's messages).
    """
    x = tensor_arg(input, "view")
    new, old = np.dtype(dtype), x.dtype
    if new.itemsize != old.itemsize:
        _check_view_dtype(x, old, new)
    return Tensor(x._data.view(new))


def _check_view_dtype(x: Tensor, old: np.dtype, new: np.dtype) -> None:
    """PyTorch's conditions for reading ``x``'s memory as ``new``, of another element size."""
    what = f"to view {dispatch.scalar_type_name(old)} as {dispatch.scalar_type_name(new)} (different element sizes)"
    if x.ndim == 0:
        raise ShapeError(f"self.dim() cannot be 0 {what}")
    strides = x.stride()
    if strides[-1] != 1:
        raise ShapeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
    ratio = new.itemsize // old.itemsize
    if ratio <= 1:  # a smaller element: every place and stride still falls on one
        return
    if x.shape[-1] % ratio:
        raise ShapeError(f"self.size(-1) must be divisible by {ratio} {what}, but got {x.shape[-1]}")
    if x.storage_offset() % ratio:
        raise ShapeError(f"self.storage_offset() must be divisible by {ratio} {what}, but got {x.storage_offset()}")
    for d, stride in enumerate(strides[:-1]):
        if stride % ratio:
            raise ShapeError(f"self.stride({d}) must be divisible by {ratio} {what}, but got {stride}")


def flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Any:  # noqa: A002 - torch's name
    """Merge dimensions ``start_dim`` to ``end_dim`` (inclusive) into one; a 0-d tensor becomes 1-d.

    Raises:
        ShapeError: ``start_dim`` comes after ``end_dim``. IndexError: a dim is out of range.
    """
    x = tensor_arg(input, "flatten")
    start, end = _dim(start_dim, x.ndim), _dim(end_dim, x.ndim)
    if x.ndim == 0:
        return Reshape.apply(x, (1,))
    if start > end:
        raise ShapeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = x.shape[:start] + (math.prod(x.shape[start:end + 1]),) + x.shape[end + 1:]
    return x if shape == x.shape else Reshape.apply(x, shape)


def unsqueeze(input: Any, dim: int) -> Any:  # noqa: A002
    """A view with a new dimension of size 1 at ``dim`` (in [-ndim-1, ndim])."""
    x = tensor_arg(input, "unsqueeze")
    dim = _dim(dim, x.ndim + 1)
    return Reshape.apply(x, x.shape[:dim] + (1,) + x.shape[dim:])


def squeeze(input: Any, dim: Any = None) -> Any:  # noqa: A002
    """A view without the size-1 dimensions (all of them, or those of ``dim``, an int or a tuple;
    a named dimension whose size is not 1 stays)."""
    x = tensor_arg(input, "squeeze")
    if dim is None:
        dims = set(range(x.ndim))
    else:
        dims = set()
        for d in (dim,) if isinstance(dim, int) else dim:
            d = _dim(d, x.ndim)
            if d in dims:
                raise ShapeError(f"dim {d} appears multiple times in the list of dims")
            dims.add(d)
    shape = tuple(n for d, n in enumerate(x.shape) if not (d in dims and n == 1))
    return Reshape.apply(x, shape)  # a new view even with nothing to squeeze, as PyTorch's


def expand(input: Any, sizes: Sequence[int]) -> Any:  # noqa: A002
    """A broadcast view of size ``sizes`` (-1 keeps a size; new dimensions go in front).

    Raises:
        ShapeError: fewer sizes than dimensions, -1 for a new dimension, or a size that differs
            from a non-singleton one, with PyTorch's message.
    """
    x = tensor_arg(input, "expand")
    sizes = tuple(int(s) for s in sizes)
    if len(sizes) < x.ndim:
        raise ShapeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                         f"number of dimensions in the tensor ({x.ndim})")
    lead = len(sizes) - x.ndim
    shape = []
    for i, size in enumerate(sizes):
        if i < lead:
            if size < 0:
                raise ShapeError(f"expand: the expanded size of the tensor ({size}) isn't allowed in a leading, "
                                 f"non-existing dimension {i}")
            shape.append(size)
            continue
        current = x.shape[i - lead]
        if size == -1:
            size = current
        elif current != 1 and size != current:
            raise ShapeError(f"The expanded size of the tensor ({size}) must match the existing size ({current}) at "
                             f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(x.shape)}")
        shape.append(size)
    if tuple(shape) == x.shape:
        return Reshape.apply(x, x.shape)  # a new view, writable as the input (a broadcast view is read-only)
    return Expand.apply(x, tuple(shape))


def split(tensor: Any, split_size_or_sections: Any, dim: int = 0) -> tuple[Any, ...]:
    """Views of consecutive pieces along ``dim``: of ``split_size_or_sections`` each (an int; the
    last piece may be smaller) or of the sizes in that list.

    Raises:
        ShapeError: sizes that do not add up to the dimension, or a split size below 1 for a
            non-empty dimension.
    """
    x = tensor_arg(tensor, "split")
    if x.ndim == 0:
        raise ShapeError("split expects at least a 1-dimensional tensor")
    dim = _dim(dim, x.ndim)
    total = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0:
            raise ShapeError(f"split expects split_size be non-negative, but got split_size={size}")
        if size == 0 and total:
            raise ShapeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {total}")
        sizes = [size] * (total // size) + ([total % size] if total % size else []) if total else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes):
            raise ShapeError(f"split_with_sizes expects split_sizes have only non-negative entries, but got "
                             f"split_sizes={sizes}")
        if sum(sizes) != total:
            raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {total} (input tensor's size "
                             f"at dimension {dim}), but got split_sizes={sizes}")
    pieces = Split.apply(x, tuple(sizes), dim)
    return pieces if isinstance(pieces, tuple) else (pieces,)


def chunk(input: Any, chunks: int, dim: int = 0) -> tuple[Any, ...]:  # noqa: A002
    """At most ``chunks`` views along ``dim``, each of ceil(size / chunks) (the last may be smaller);
    ``chunks`` empty views of an empty dim.

    Raises:
        ShapeError: ``chunks`` below 1.
    """
    x = tensor_arg(input, "chunk")
    if chunks < 1:
        raise ShapeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    if x.ndim == 0:
        raise ShapeError("chunk expects at least a 1-dimensional tensor")
    size = x.shape[_dim(dim, x.ndim)]
    return split(x, -(-size // chunks) if size else [0] * chunks, dim)


def t(input: Any) -> Any:  # noqa: A002
    """The transpose of a matrix; a 0-d or 1-d tensor as it is.

    Raises:
        ShapeError: more than 2 dimensions.
    """
    x = tensor_arg(input, "t")
    if x.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return Permute.apply(x, (1, 0)) if x.ndim == 2 else x
