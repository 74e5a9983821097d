"""Norms: ``zgrad.linalg.vector_norm`` (:mod:`zgrad.ops.vector_norm`), ``matrix_norm``, ``norm``,
and ``zgrad.norm`` / ``Tensor.norm`` (PyTorch's older entry point, which calls those). Matrix
norms compose differentiable ops: Frobenius a vector norm, 1 and inf sums of |A| and their
extreme, 2 / -2 / nuclear the singular values (CPU only, as :func:`~zgrad.linalg.svdvals`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zgrad.errors import DTypeError, ShapeError, ZgradError
from zgrad.kernels import dispatch
from zgrad.linalg.decompositions import svdvals
from zgrad.ops._args import tensor_arg
from zgrad.ops.elementwise import Cast, abs as _abs
from zgrad.ops.functions import getitem, permute
from zgrad.ops.reduce import max as _max, min as _min, sum as _sum
from zgrad.ops.shape import squeeze, unsqueeze
from zgrad.ops.vector_norm import vector_norm
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op

__all__ = ["vector_norm", "matrix_norm", "norm", "legacy_norm"]

_MATRIX_ORDERS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _dims(dim: Any) -> tuple[int, ...] | None:
    return None if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)


def _matrix_dims(dim: Any, ndim: int) -> tuple[int, int]:
    dims = _dims(dim)
    if dims is None or len(dims) != 2:
        raise ShapeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(str(d) for d in dims or ())}")
    d0, d1 = (dispatch._normalize_axes(d, ndim)[0] for d in dims)
    if d0 == d1:
        raise ShapeError(f"linalg.matrix_norm: dims must be different. Got ({dims[0]}, {dims[1]})")
    return d0, d1


def _extreme(x: Any, dim: int, largest: bool) -> Any:
    return (_max if largest else _min)(x, dim, True).values


@autocast_op("linalg_matrix_norm")
def matrix_norm(A: Any, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,  # noqa: A002,N803
                dtype: Any = None) -> Any:
    """The ``ord`` matrix norm of the matrices of ``A`` over the two dimensions ``dim``: "fro"
    (Frobenius), "nuc" (sum of singular values), 2 / -2 (largest / smallest singular value),
    1 / -1 (max / min column sum of |A|), inf / -inf (max / min row sum). ``dtype`` casts first.

    Raises:
        ZgradError: an unsupported ``ord``. ShapeError: fewer than 2 dimensions, or ``dim`` not 2 dims.
        DTypeError: not floating.
    """
    a = tensor_arg(A, "linalg.matrix_norm", "A")
    if dtype is not None and a.dtype != dtype:
        a = Cast.apply(a, np.dtype(dtype))
    if not is_floating(a.dtype):
        raise DTypeError("linalg.matrix_norm: Expected a floating point or complex tensor as input. Got "
                         f"{dispatch.scalar_type_name(a.dtype)}")
    if a.ndim < 2:
        raise ShapeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if ord not in _MATRIX_ORDERS:
        raise ZgradError(f"linalg.matrix_norm: Order {ord} not supported.")
    d0, d1 = _matrix_dims(dim, a.ndim)
    if ord == "fro":
        return vector_norm(a, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        rest = [d for d in range(a.ndim) if d not in (d0, d1)]
        s = svdvals(permute(a, rest + [d0, d1]))
        result = _sum(s, -1) if ord == "nuc" else getitem(s, (Ellipsis, 0 if ord == 2 else -1))
        for d in sorted((d0, d1)) if keepdim else ():
            result = unsqueeze(result, d)
        return result
    summed, along = (d0, d1) if abs(ord) == 1 else (d1, d0)
    result = _extreme(_sum(_abs(a), summed, True), along, ord > 0)
    return result if keepdim else squeeze(result, (d0, d1))


def norm(A: Any, ord: Any = None, dim: Any = None, keepdim: bool = False, *,  # noqa: A002,N803
         dtype: Any = None) -> Any:
    """A vector or matrix norm, as ``torch.linalg.norm``: with ``dim`` an int (or ``ord`` given
    on a 1-D ``A``) :func:`vector_norm`, with ``dim`` a 2-tuple (or ``ord`` given on a 2-D ``A``)
    :func:`matrix_norm`; with neither ``ord`` nor ``dim``, the 2-norm of all elements.

    Raises:
        ShapeError: ``ord`` without ``dim`` on an input that is neither 1-D nor 2-D.
    """
    a = tensor_arg(A, "linalg.norm", "A")
    dims = _dims(dim)
    if dims is None and ord is not None:
        if a.ndim not in (1, 2):
            raise ShapeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                             f"Got {a.ndim}D.")
        dims = tuple(range(a.ndim))
    if dims is not None and len(dims) == 2:
        return matrix_norm(a, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
    return vector_norm(a, 2 if ord is None else ord, dims, keepdim, dtype=dtype)


@autocast_op("norm")
def legacy_norm(input: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False,  # noqa: A002
                dtype: Any = None) -> Any:
    """``zgrad.norm`` (``torch.norm``): "fro" over at most two dimensions (or all) is the vector
    2-norm, other strings (``"nuc"``) the matrix norm over ``dim`` (default all, which must be
    two), a number ``p`` (None means 2) the vector ``p``-norm over ``dim``."""
    x = tensor_arg(input, "norm")
    dims = _dims(dim)
    if isinstance(p, str):
        if p == "fro" and (dims is None or len(dims) <= 2):
            return vector_norm(x, 2, dims, keepdim, dtype=dtype)
        return matrix_norm(x, p, tuple(range(x.ndim)) if dims is None else dims, keepdim, dtype=dtype)
    return vector_norm(x, 2 if p is None else p, dims, keepdim, dtype=dtype)
