"""Triangles and diagonals of matrices: tril, triu (and their index lists), diagonal, diag,
diag_embed, diagflat, trace and block_diag.

tril and triu keep the elements a host mask of the matrix shape selects (one ``where`` over the
batch); a diagonal is a strided view (writes through it reach the input, as PyTorch's), whose
gradient is written into the same view of zeros, and diag_embed is that write forward with the
view as its backward.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zgrad.autograd.function import Op
from zgrad.creation import tensor as _new_tensor
from zgrad.errors import ShapeError
from zgrad.kernels import dispatch, dispatch_index
from zgrad.kernels.dispatch_index import normalize_dim
from zgrad.ops._args import tensor_arg
from zgrad.kernels.promotion import get_default_dtype, result_type
from zgrad.ops.functions import clone, reshape
from zgrad.ops.reduce import sum as _sum
from zgrad.ops.autocast import autocast_op
from zgrad.ops.out_argument import accepts_out

__all__ = [
    "tril", "triu", "tril_indices", "triu_indices", "diagonal", "diag", "diag_embed", "diagflat", "trace", "block_diag",
]


def _keep(x: Any, keep: np.ndarray) -> Any:
    """``x`` where the (rows, cols) host mask ``keep`` is True, else 0, over every matrix of ``x``."""
    device_type = dispatch.device_type_of(x)
    zero = dispatch.full((), 0, x.dtype, device_type)
    return dispatch_index.where(dispatch.to_device(keep, device_type), x, zero)


class KeepTriangle(Op):
    """The elements of a triangle (a mask of the matrix shape), zeros elsewhere; the gradient is
    masked the same way."""

    @staticmethod
    def forward(ctx, x, keep):
        ctx.keep = keep
        return _keep(x, keep)

    @staticmethod
    def backward(ctx, grad):
        return _keep(grad, ctx.keep), None


def triangle_mask(shape: tuple[int, ...], diagonal: int, lower: bool, what: str) -> np.ndarray:
    """The host mask of the lower (``tril``) or upper (``triu``) triangle of the matrices of ``shape``.

    Raises:
        ShapeError: fewer than 2 dimensions, with PyTorch's message.
    """
    if len(shape) < 2:
        raise ShapeError(f"{what}: input tensor must have at least 2 dimensions")
    rows, cols = shape[-2:]
    if lower:
        return np.tri(rows, cols, int(diagonal), dtype=bool)
    return ~np.tri(rows, cols, int(diagonal) - 1, dtype=bool)


@accepts_out("exact")
def tril(input: Any, diagonal: int = 0) -> Any:  # noqa: A002 - torch's argument name
    """The lower triangle of the matrices of ``input`` (the last two dims): elements on and below
    the ``diagonal``-th diagonal (0 the main one, > 0 above it, < 0 below it); zeros elsewhere.

    Raises:
        ShapeError: ``input`` has fewer than 2 dimensions.
    """
    x = tensor_arg(input, "tril")
    return KeepTriangle.apply(x, triangle_mask(x.shape, diagonal, True, "tril"))


@accepts_out("exact")
def triu(input: Any, diagonal: int = 0) -> Any:  # noqa: A002
    """The upper triangle of the matrices of ``input``: elements on and above the ``diagonal``-th
    diagonal; zeros elsewhere.

    Raises:
        ShapeError: ``input`` has fewer than 2 dimensions.
    """
    x = tensor_arg(input, "triu")
    return KeepTriangle.apply(x, triangle_mask(x.shape, diagonal, False, "triu"))


def _indices(rows: np.ndarray, cols: np.ndarray, dtype: Any, device: Any, what: str) -> Any:
    dtype = np.dtype(np.int64 if dtype is None else dtype)
    if dtype.kind not in "iu":
        raise NotImplementedError(f"\"{what}\" not implemented for '{dispatch.scalar_type_name(dtype)}'")
    return _new_tensor(np.stack([rows, cols]), dtype=dtype, device=device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Any:
    """The (2, N) coordinates of the lower triangle of a ``row`` x ``col`` matrix (on and below
    the ``offset``-th diagonal), row by row; int64 unless ``dtype`` says otherwise.

    Raises:
        ShapeError: a negative ``row`` or ``col``. NotImplementedError: a non-integer ``dtype``
            (as PyTorch).
    """
    _check_matrix_size(row, col, "tril_indices")
    rows, cols = np.nonzero(np.tri(row, col, offset, dtype=bool))
    return _indices(rows, cols, dtype, device, "tril_indices")


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Any:
    """The (2, N) coordinates of the upper triangle of a ``row`` x ``col`` matrix (on and above
    the ``offset``-th diagonal), row by row; int64 unless ``dtype`` says otherwise.

    Raises:
        ShapeError: a negative ``row`` or ``col``. NotImplementedError: a non-integer ``dtype``
            (as PyTorch).
    """
    _check_matrix_size(row, col, "triu_indices")
    rows, cols = np.nonzero(~np.tri(row, col, offset - 1, dtype=bool))
    return _indices(rows, cols, dtype, device, "triu_indices")


def _check_matrix_size(row: int, col: int, what: str) -> None:
    for name, size in (("row", row), ("col", col)):
        if size < 0:
            raise ShapeError(f"{name} must be non-negative, got{size}")


def matrix_dims(dim1: int, dim2: int, ndim: int) -> tuple[int, int]:
    """``dim1`` and ``dim2`` in [0, ndim), the two dims of a diagonal.

    Raises:
        IndexError: a dim is out of range. ShapeError: they name the same dim.
    """
    d1, d2 = normalize_dim(dim1, ndim), normalize_dim(dim2, ndim)
    if d1 == d2:
        raise ShapeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


class Diagonal(Op):
    """A view of the ``offset``-th diagonal of the matrices in dims ``dim1``, ``dim2``; the
    gradient is zeros with the incoming gradient on that diagonal."""

    returns_view = True

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.shape, ctx.where = x.shape, (offset, dim1, dim2)
        return dispatch_index.diagonal_view(x, offset, dim1, dim2)

    @staticmethod
    def backward(ctx, grad):
        out = dispatch.full(ctx.shape, 0, grad.dtype, dispatch.device_type_of(grad))
        dispatch.copy_into(dispatch_index.diagonal_view(out, *ctx.where), grad)
        return out, None, None, None


def diagonal(input: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:  # noqa: A002
    """A view of the ``offset``-th diagonal of the matrices ``input`` spans in dims ``dim1``
    (rows) and ``dim2`` (columns), 0 the main one, > 0 above it, < 0 below it, as the last dim
    of the result.

    Raises:
        IndexError: a dim is out of range. ShapeError: ``dim1`` and ``dim2`` name the same dim.
    """
    x = tensor_arg(input, "diagonal")
    return Diagonal.apply(x, offset, *matrix_dims(dim1, dim2, x.ndim))


class DiagEmbed(Op):
    """Zeros of ``shape`` with the last dim of ``x`` on the ``offset``-th diagonal of the
    matrices in dims ``dim1``, ``dim2``; the gradient is that diagonal of the incoming one."""

    @staticmethod
    def forward(ctx, x, shape, offset, dim1, dim2):
        ctx.where = (offset, dim1, dim2)
        out = dispatch.full(shape, 0, x.dtype, dispatch.device_type_of(x))
        dispatch.copy_into(dispatch_index.diagonal_view(out, offset, dim1, dim2), x)
        return out

    @staticmethod
    def backward(ctx, grad):
        return dispatch_index.diagonal_view(grad, *ctx.where), None, None, None, None


def diag_embed(input: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:  # noqa: A002
    """Matrices (in dims ``dim1``, ``dim2`` of the result, which has one more dim than ``input``)
    zero but for their ``offset``-th diagonal, which holds the last dim of ``input``.

    Raises:
        IndexError: a dim is out of range. ShapeError: ``dim1`` and ``dim2`` name the same dim.
    """
    x = tensor_arg(input, "diag_embed")
    ndim = x.ndim + 1
    d1, d2 = matrix_dims(dim1, dim2, ndim)
    size = x.shape[-1] + abs(offset)
    batch = iter(x.shape[:-1])
    shape = tuple(size if d in (d1, d2) else next(batch) for d in range(ndim))
    return DiagEmbed.apply(x, shape, offset, d1, d2)


@accepts_out("exact")
def diag(input: Any, diagonal: int = 0) -> Any:  # noqa: A002
    """A 1-D ``input`` as the ``diagonal``-th diagonal of a square matrix (zeros elsewhere), or
    a copy of the ``diagonal``-th diagonal of a 2-D ``input``.

    Raises:
        ShapeError: ``input`` is neither 1-D nor 2-D.
    """
    x = tensor_arg(input, "diag")
    if x.ndim == 1:
        return diag_embed(x, diagonal)
    if x.ndim == 2:
        return clone(Diagonal.apply(x, diagonal, 0, 1))
    raise ShapeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")


@autocast_op()
def trace(input: Any) -> Any:  # noqa: A002
    """The sum of the main diagonal of a matrix (int64 for integer matrices).

    Raises:
        ShapeError: ``input`` is not 2-D. NotImplementedError: a bool matrix (as PyTorch).
    """
    x = tensor_arg(input, "trace")
    if x.dtype == np.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    return _sum(diagonal(x))


def diagflat(input: Any, offset: int = 0) -> Any:  # noqa: A002
    """A square matrix with the elements of ``input`` (flattened) on its ``offset``-th diagonal
    and zeros elsewhere."""
    return diag_embed(reshape(tensor_arg(input, "diagflat"), (-1,)), offset)


class BlockDiag(Op):
    """Matrices placed corner to corner along the diagonal of a zero matrix (their promoted
    dtype); each gets its block of the gradient."""

    @staticmethod
    def forward(ctx, *blocks):
        rows, cols = np.cumsum([(0, 0)] + [b.shape for b in blocks], axis=0).T.tolist()
        ctx.places = [(slice(r, r + b.shape[0]), slice(c, c + b.shape[1])) for b, r, c in zip(blocks, rows, cols)]
        ctx.dtypes = [b.dtype for b in blocks]
        out = dispatch.full((rows[-1], cols[-1]), 0, result_type(*blocks), dispatch.device_type_of(blocks[0]))
        for block, place in zip(blocks, ctx.places):
            dispatch.copy_into(out[place], block)
        return out

    @staticmethod
    def backward(ctx, grad):
        return tuple(dispatch.as_dtype(grad[place], dtype) for place, dtype in zip(ctx.places, ctx.dtypes))


def block_diag(*tensors: Any) -> Any:
    """The block-diagonal matrix of ``tensors`` (matrices; a 1-D tensor is a row, a 0-d one a
    1 x 1 matrix), zeros elsewhere, in their promoted dtype.

    Raises:
        ShapeError: a tensor with more than 2 dims.
    """
    blocks = []
    for i, t in enumerate(tensors):
        t = tensor_arg(t, "block_diag")
        if t.ndim > 2:
            raise ShapeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has {t.ndim} "
                             f"dimensions")
        blocks.append(t if t.ndim == 2 else reshape(t, (1, t.numel())))
    if not blocks:
        return _new_tensor(np.zeros((1, 0)), dtype=get_default_dtype())
    return BlockDiag.apply(*blocks)
