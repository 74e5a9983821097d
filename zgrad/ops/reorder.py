"""Copies that reorder or repeat elements: flip (fliplr, flipud), roll, rot90, repeat, tile,
repeat_interleave, unfold (sliding windows) and combinations. Each result is new memory (where
PyTorch's unfold gives a view, this one copies).

A flip is a reversed-stride view copied; roll joins the two slices of each rolled dim (its
gradient rolls back); repeat copies a broadcast view whose gradient is a sum over the repeat
axes; repeat_interleave and combinations select indices along a dim, so their gradient is
index_select's scatter-add; unfold copies a strided view of the windows.
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from zgrad.autograd.function import Op
from zgrad.errors import ShapeError
from zgrad.kernels import dispatch, dispatch_index
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.ops._args import int_tuple, tensor_arg
from zgrad.ops.backward_ops import linear_in_grad
from zgrad.ops.functions import clone, reshape, transpose
from zgrad.ops.indexing import IndexSelect
from zgrad.tensor import Tensor

__all__ = [
    "flip", "fliplr", "flipud", "roll", "rot90", "repeat", "tile", "repeat_interleave", "unfold", "combinations",
]


class Flip(Op):
    """A copy with the dims of ``index`` (reversing slices) reversed; so is the gradient."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, index):
        ctx.index = index
        return dispatch.cast(x[index], x.dtype)

    @staticmethod
    def backward(ctx, grad):
        def flipped(g):  # its own adjoint
            return dispatch.cast(g[ctx.index], g.dtype)

        return linear_in_grad(grad, flipped, flipped), None


def flip(input: Any, dims: Any) -> Any:  # noqa: A002 - torch's argument name
    """A copy of ``input`` with the order of the elements along each of ``dims`` (a sequence)
    reversed.

    Raises:
        IndexError: a dim is out of range. ShapeError: a dim appears twice. TypeError: ``dims``
            is an int (``Tensor.flip`` takes ints as varargs).
    """
    x = tensor_arg(input, "flip")
    if isinstance(dims, (int, np.integer)):
        raise TypeError("flip(): argument 'dims' (position 2) must be tuple of ints, not int")
    reversed_dims = set()
    for d in int_tuple(dims):
        d = normalize_dim(d, x.ndim)
        if d in reversed_dims:
            raise ShapeError(f"dim {d} appears multiple times in the list of dims")
        reversed_dims.add(d)
    index = tuple(slice(None, None, -1) if d in reversed_dims else slice(None) for d in range(x.ndim))
    return Flip.apply(x, index)


def fliplr(input: Any) -> Any:  # noqa: A002
    """``input`` flipped left to right (along dim 1).

    Raises:
        ShapeError: fewer than 2 dimensions.
    """
    x = tensor_arg(input, "fliplr")
    if x.ndim < 2:
        raise ShapeError("Input must be >= 2-d.")
    return flip(x, (1,))


def flipud(input: Any) -> Any:  # noqa: A002
    """``input`` flipped upside down (along dim 0).

    Raises:
        ShapeError: a 0-d tensor.
    """
    x = tensor_arg(input, "flipud")
    if x.ndim < 1:
        raise ShapeError("Input must be >= 1-d.")
    return flip(x, (0,))


class Roll(Op):
    """A copy with the elements of each dim of ``moves`` ((dim, shift) pairs) moved ``shift``
    places round; the gradient moves back."""

    differentiable_backward = True

    @staticmethod
    def forward(ctx, x, moves):
        ctx.moves = moves
        return Roll.rolled(x, moves)

    @staticmethod
    def backward(ctx, grad):
        back = tuple((dim, -shift) for dim, shift in ctx.moves)
        return linear_in_grad(grad, lambda g: Roll.rolled(g, back), lambda g: Roll.rolled(g, ctx.moves)), None

    @staticmethod
    def rolled(a, moves):
        """``a`` rolled by ``moves``: each dim's two pieces joined in swapped order (a copy)."""
        if not moves:
            return dispatch.cast(a, a.dtype)
        for dim, shift in moves:
            lead = (slice(None),) * dim
            cut = a.shape[dim] - shift % a.shape[dim]
            a = dispatch.concatenate([a[lead + (slice(cut, None),)], a[lead + (slice(None, cut),)]], dim)
        return a


def roll(input: Any, shifts: Any, dims: Any = None) -> Any:  # noqa: A002
    """A copy of ``input`` with its elements moved ``shifts`` places along ``dims`` (those
    leaving at one end come back at the other); without ``dims``, along the flattened tensor,
    whose shape is then restored.

    Raises:
        ShapeError: ``shifts`` and ``dims`` differ in length. IndexError: a dim is out of range.
    """
    x = tensor_arg(input, "roll")
    shifts = int_tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return reshape(roll(reshape(x, (-1,)), shifts, 0), x.shape)
    dims = int_tuple(dims)
    if len(shifts) != len(dims):
        raise ShapeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    moves = []
    for shift, dim in zip(shifts, dims):
        dim = normalize_dim(dim, x.ndim)
        if x.ndim and x.shape[dim] and shift % x.shape[dim]:
            moves.append((dim, shift))
    return Roll.apply(x, tuple(moves))


def rot90(input: Any, k: int = 1, dims: Sequence[int] = (0, 1)) -> Any:  # noqa: A002
    """``input`` rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first dim
    towards the second.

    Raises:
        ShapeError: ``dims`` is not two distinct dims, or ``input`` has fewer than 2 dimensions.
        IndexError: a dim is out of range.
    """
    x = tensor_arg(input, "rot90")
    dims = int_tuple(dims)
    if len(dims) != 2:
        raise ShapeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if x.ndim < 2:
        raise ShapeError(f"expected total dims >= 2, but got total dims = {x.ndim}")
    first, second = normalize_dim(dims[0], x.ndim), normalize_dim(dims[1], x.ndim)
    if first == second:
        raise ShapeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return transpose(flip(x, (second,)), first, second)
    if k == 2:
        return flip(x, (first, second))
    if k == 3:
        return transpose(flip(x, (first,)), first, second)
    return clone(x)


class Repeat(Op):
    """``x`` (already of the result's rank) tiled ``repeats`` times along each dim; the gradient
    sums the tiles."""

    @staticmethod
    def forward(ctx, x, repeats):
        ctx.shape = x.shape
        ctx.paired = tuple(n for pair in zip(repeats, x.shape) for n in pair)
        tiled = dispatch.broadcast_to(x.reshape(tuple(n for size in x.shape for n in (1, size))), ctx.paired)
        return dispatch.cast(tiled, x.dtype).reshape(tuple(r * n for r, n in zip(repeats, x.shape)))

    @staticmethod
    def backward(ctx, grad):
        tiles = tuple(range(0, len(ctx.paired), 2))
        return dispatch.reduce_sum(grad.reshape(ctx.paired), tiles).reshape(ctx.shape), None


def _tiled(x: Any, repeats: tuple[int, ...]) -> Any:
    if any(r < 0 for r in repeats):
        raise ShapeError(f"Trying to create tensor with negative dimension {min(repeats)}: {list(repeats)}")
    lead = len(repeats) - x.ndim
    if lead:
        x = reshape(x, (1,) * lead + x.shape)
    return Repeat.apply(x, repeats)


def repeat(input: Any, *sizes: Any) -> Any:  # noqa: A002
    """A copy of ``input`` repeated ``sizes[i]`` times along dim i; extra leading sizes add dims.

    Raises:
        ShapeError: fewer sizes than ``input`` has dims, or a negative size.
    """
    x = tensor_arg(input, "repeat")
    repeats = int_tuple(sizes[0] if len(sizes) == 1 and not isinstance(sizes[0], (int, np.integer)) else sizes)
    if len(repeats) < x.ndim:
        raise ShapeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    return _tiled(x, repeats)


def tile(input: Any, dims: Sequence[int]) -> Any:  # noqa: A002
    """``input`` repeated ``dims[i]`` times along dim i, as :func:`repeat`, except that fewer
    ``dims`` than ``input`` has dims are padded with leading 1s.

    Raises:
        ShapeError: a negative repeat count.
    """
    x = tensor_arg(input, "tile")
    repeats = int_tuple(dims)
    return _tiled(x, (1,) * (x.ndim - len(repeats)) + repeats)


def _selected(x: Any, dim: int, positions: np.ndarray) -> Any:
    """The slices of ``x`` at host ``positions`` (1-D) along ``dim``, copied to ``x``'s device."""
    return IndexSelect.apply(x, dim, dispatch.to_device(positions, dispatch.device_type_of(x._data)))


def _counts(repeats: Any, size: int, output_size: int | None) -> np.ndarray:
    """The host array of per-element repeat counts of a tensor ``repeats`` (blocks on a CUDA one).

    Raises:
        ShapeError: not 0-d or 1-d, a length other than ``size``, a negative count, or a total
            other than ``output_size``. TypeError: not an integer tensor.
    """
    counts = repeats._host()
    if counts.dtype.kind not in "iu":
        raise TypeError(f"repeat_interleave: repeats must be an integer tensor, got {counts.dtype}")
    if counts.ndim > 1:
        raise ShapeError("repeats must be 0-dim or 1-dim tensor")
    counts = np.broadcast_to(counts, (size,)) if counts.ndim == 0 else counts
    if counts.shape[0] != size:
        raise ShapeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                         f"{counts.shape[0]} and input.size(0) = {size}")
    if counts.size and counts.min() < 0:
        raise ShapeError("repeats can not be negative")
    if output_size is not None and int(counts.sum()) != output_size:
        raise ShapeError(f"allocated size does not match required size: output_size={output_size}, "
                         f"the repeats add up to {int(counts.sum())}")
    return counts


def repeat_interleave(input: Any, repeats: Any = None, dim: int | None = None, *,  # noqa: A002
                      output_size: int | None = None) -> Any:
    """Each element (slice along ``dim``; of the flattened tensor when ``dim`` is None) of
    ``input`` repeated ``repeats`` times in a row: an int, or a tensor of per-element counts.
    ``repeat_interleave(counts)`` alone gives each position of ``counts`` repeated its count times.

    Blocks until a CUDA ``repeats`` tensor is on the host (the result's size depends on it).

    Raises:
        ShapeError: counts of the wrong shape or negative. IndexError: ``dim`` is out of range.
    """
    x = tensor_arg(input, "repeat_interleave")
    if repeats is None:
        counts = _counts(x, x.shape[0] if x.ndim else 1, output_size)
        positions = np.repeat(np.arange(counts.size, dtype=x.dtype), counts)
        return Tensor(dispatch.to_device(positions, dispatch.device_type_of(x._data)))
    if dim is None:
        x, dim = reshape(x, (-1,)), 0
    if x.ndim == 0:
        raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
    dim = normalize_dim(dim, x.ndim)
    size = x.shape[dim]
    if isinstance(repeats, Tensor):
        counts = _counts(repeats, size, output_size)
    elif int(repeats) < 0:
        raise ShapeError("repeats can not be negative")
    else:
        counts = np.full(size, int(repeats))
    return _selected(x, dim, np.repeat(np.arange(size, dtype=np.int64), counts))



class Unfold(Op):
    """The windows of ``size`` elements ``step`` apart along ``dim`` (a window count in ``dim``,
    each window in a new last dim), copied from a strided view; the gradient adds each window's
    part back where it came from: in one copy when windows do not overlap, else one add per
    offset in the window (the windows' elements at one offset never overlap)."""

    @staticmethod
    def forward(ctx, x, dim, size, step):
        ctx.shape, ctx.dim, ctx.size, ctx.step = x.shape, dim, size, step
        return dispatch.cast(dispatch_index.sliding_windows(x, dim, size, step), x.dtype)

    @staticmethod
    def backward(ctx, grad):
        out = dispatch.full(ctx.shape, 0, grad.dtype, dispatch.device_type_of(grad))
        windows = dispatch_index.sliding_windows(out, ctx.dim, ctx.size, ctx.step, writeable=True)
        if ctx.step >= ctx.size:
            dispatch.copy_into(windows, grad)
        else:
            for offset in range(ctx.size):
                dispatch.add_inplace(windows[..., offset], grad[..., offset])
        return out, None, None, None


def unfold(input: Any, dimension: int, size: int, step: int) -> Any:  # noqa: A002
    """Every window of ``size`` elements along ``dimension``, ``step`` apart: that dim becomes the
    number of windows and a last dim of ``size`` holds each window (``Tensor.unfold``).

    Raises:
        ShapeError: a window larger than the dim, or a step below 1. IndexError: a bad dim.
    """
    x = tensor_arg(input, "unfold")
    dim = normalize_dim(dimension, x.ndim)
    length = x.shape[dim] if x.ndim else 1
    if size > length:
        raise ShapeError(f"maximum size for tensor at dimension {dim} is {length} but size is {size}")
    if step <= 0:
        raise ShapeError(f"step is {step} but must be > 0")
    if x.ndim == 0:
        return reshape(x, (1,))
    return Unfold.apply(x, dim, size, step)


def combinations(input: Any, r: int = 2, with_replacement: bool = False) -> Any:  # noqa: A002
    """The ``r``-element combinations of the elements of a 1-D ``input`` as rows, in
    ``itertools.combinations`` order (``combinations_with_replacement`` with ``with_replacement``).

    Raises:
        ShapeError: ``input`` is not 1-D, or ``r`` is negative.
    """
    x = tensor_arg(input, "combinations")
    if x.ndim != 1:
        raise ShapeError(f"Expect a 1D vector, but got shape {list(x.shape)}")
    if r < 0:
        raise ShapeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return x[:0]
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    positions = np.fromiter(itertools.chain.from_iterable(choose(range(x.shape[0]), r)), dtype=np.int64)
    return reshape(_selected(x, 0, positions), (-1, r))
