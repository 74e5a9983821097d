"""Functions of ``zgrad.linalg`` composed of the others: ``solve_triangular``, ``cholesky_solve``
(``torch.cholesky_solve``), ``matrix_power``, ``multi_dot``, ``matrix_rank``, ``matrix_exp``,
``chain_matmul``, ``vander``, ``diagonal``; each differentiates through what it is made of."""

from __future__ import annotations

from typing import Any, Sequence

import warnings

import numpy as np

from zgrad.errors import DTypeError, ShapeError
from zgrad.kernels import dispatch
from zgrad.linalg._arrays import constant
from zgrad.linalg._checks import matrices, square_matrices
from zgrad.linalg.decompositions import svdvals
from zgrad.linalg.solvers import inv, solve
from zgrad.ops._args import tensor_arg
from zgrad.creation import ones_like
from zgrad.ops.functions import add, cat, matmul, mul, transpose
from zgrad.ops.reduce_scan import cumprod
from zgrad.ops.triangular import diagonal as ops_diagonal
from zgrad.ops.reduce import sum as _sum
from zgrad.ops.shape import expand, squeeze, unsqueeze
from zgrad.tensor import Tensor
from zgrad.kernels.promotion import is_floating
from zgrad.ops.autocast import autocast_op
from zgrad.warning_location import user_stacklevel

__all__ = ["solve_triangular", "cholesky_solve", "matrix_power", "multi_dot", "matrix_rank", "matrix_exp",
           "chain_matmul", "vander", "diagonal"]

CHAIN_MATMUL_WARNING = ("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                        "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                        "multiple parameters.")
# Taylor terms of exp(X) for ||X||_1 <= 1/2 after scaling: the first term left out is below
# 0.5**19 / 19! ~ 2e-23, under float64's rounding.
_EXP_TERMS = 18


def _like(value: np.ndarray, x: Any) -> Tensor:
    return Tensor(constant(value, x._data))


def solve_triangular(A: Any, B: Any, *, upper: bool, left: bool = True,  # noqa: N803 - torch's names
                     unitriangular: bool = False) -> Any:
    """X with A X = B (``left``) or X A = B for triangular ``A`` (..., n, n): only its upper
    (``upper``) or lower triangle is read, and its diagonal taken as ones when ``unitriangular``;
    the gradient of ``A`` is triangular too. ``B`` is a batch of matrices; batch dimensions
    broadcast. Solved by :func:`~zgrad.linalg.solve` on the triangle (CPU only).

    Raises:
        ShapeError: ``B`` has fewer than 2 dimensions, or sizes that do not fit.
        LinAlgError: a zero on the diagonal.
    """
    a = square_matrices(A, "linalg.solve_triangular")
    b = tensor_arg(B, "linalg.solve_triangular", "B")
    if b.ndim < 2:
        raise ShapeError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    n = a.shape[-1]
    triangle = np.triu(np.ones((n, n)), 1 if unitriangular else 0) if upper else \
        np.tril(np.ones((n, n)), -1 if unitriangular else 0)
    a = mul(a, _like(triangle, a))
    if unitriangular:
        a = add(a, _like(np.eye(n), a))
    return solve(a, b, left=left)


@autocast_op()
def cholesky_solve(input: Any, input2: Any, upper: bool = False) -> Any:  # noqa: A002 - torch's names
    """X with A X = ``input`` given the Cholesky factor ``input2`` of A (lower L with A = L L^T,
    or upper U with A = U^T U when ``upper``), as ``torch.cholesky_solve``; batch dims broadcast.

    Raises:
        ShapeError: ``input`` has fewer than 2 dimensions.
    """
    b, factor = tensor_arg(input, "cholesky_solve"), tensor_arg(input2, "cholesky_solve", "input2")
    if b.ndim < 2:
        raise ShapeError(f"b should have at least 2 dimensions, but has {b.ndim} dimensions instead")
    factor_t = transpose(factor, -2, -1)
    lower, upper_factor = (factor_t, factor) if upper else (factor, factor_t)
    return solve_triangular(upper_factor, solve_triangular(lower, b, upper=False), upper=True)


def matrix_power(A: Any, n: int) -> Any:  # noqa: N803
    """``A`` (..., m, m) multiplied by itself ``n`` times, by repeated squaring: the identity for
    n = 0, powers of the inverse for n < 0 (floating ``A`` only).

    Raises:
        ShapeError: ``A`` is not a batch of square matrices. DTypeError (n < 0): not floating.
    """
    a = tensor_arg(A, "linalg.matrix_power", "A")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        shape = "x".join(str(d) for d in a.shape[-2:])
        raise ShapeError(f"linalg.matrix_power: A must be batches of square matrices, but they are {shape} matrices")
    if n < 0:
        a, n = inv(a), -n
    if n == 0:
        return expand(_like(np.eye(a.shape[-1]), a), a.shape)
    result, square = None, a
    while n:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if n:
            square = matmul(square, square)
    return result


@autocast_op("linalg_multi_dot")
def multi_dot(tensors: Sequence[Any]) -> Any:
    """The product of a chain of matrices, left to right; the first may be a vector (a row) and
    the last a vector (a column), which are dropped from the result's shape.

    Raises:
        ValueError: fewer than 2 tensors. ShapeError: a middle tensor that is not 2-D.
    """
    if len(tensors) < 2:
        raise ValueError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    ts = [tensor_arg(t, "linalg.multi_dot") for t in tensors]
    for i, t in enumerate(ts):
        if t.ndim != 2 and not (t.ndim == 1 and i in (0, len(ts) - 1)):
            raise ShapeError(f"multi_dot(): tensor {i} must be 2D{' or 1D' if i in (0, len(ts) - 1) else ''} but got "
                             f"{t.ndim}D")
    first, last = ts[0].ndim == 1, ts[-1].ndim == 1
    chain = [unsqueeze(ts[0], 0) if first else ts[0], *ts[1:-1], unsqueeze(ts[-1], 1) if last else ts[-1]]
    result = chain[0]
    for t in chain[1:]:
        result = matmul(result, t)
    if last:
        result = squeeze(result, -1)
    return squeeze(result, 0) if first else result


@autocast_op("linalg_matrix_rank")
def matrix_rank(A: Any, *, atol: float | None = None, rtol: float | None = None,  # noqa: N803
                hermitian: bool = False) -> Any:
    """The number of singular values of each matrix of ``A`` above max(atol, rtol * the
    largest), as int64 (rtol defaults to eps * max(m, n) when neither is given). ``hermitian`` is
    accepted (the SVD serves both).

    Raises:
        DTypeError: not float32/float64.
    """
    if not is_floating(tensor_arg(A, "linalg.matrix_rank", "A").dtype):
        raise DTypeError("This function doesn't handle types other than float and double")
    a = matrices(A, "linalg.matrix_rank")
    if rtol is None:
        rtol = float(np.finfo(a.dtype).eps) * max(a.shape[-2:]) if atol is None or atol <= 0 else 0.0
    s = svdvals(a.detach())
    tol = dispatch.binary("mul", s._data[..., :1], rtol)
    tol = Tensor(tol) if atol is None else Tensor(tol).clamp(min=atol)
    return _sum(s > tol, -1)


def chain_matmul(*matrices: Any) -> Any:
    """The product of 2-d ``matrices``, left to right (one matrix: itself); PyTorch's deprecated
    form of :func:`multi_dot`.

    Raises:
        RuntimeError: no matrices, or one that is not 2-d (PyTorch's messages).
    Warns:
        UserWarning: the deprecation, as PyTorch's.
    """
    warnings.warn(CHAIN_MATMUL_WARNING, UserWarning, stacklevel=user_stacklevel())
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if tensor_arg(m, "chain_matmul").ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    return matrices[0] if len(matrices) == 1 else multi_dot(matrices)


def matrix_exp(A: Any) -> Any:  # noqa: N803 - PyTorch's name
    """The matrix exponential of ``A`` (..., n, n): scaled by a power of two to 1-norm at most
    1/2, summed as a Taylor series (Horner's rule), then squared back; differentiable through those
    products, on every backend that multiplies matrices. Reads the largest 1-norm (blocks until
    the input is computed).

    Raises:
        DTypeError: a non-floating ``A`` (PyTorch's message). ShapeError: not square matrices.
    """
    a = square_matrices(A, "linalg.matrix_exp")
    if not is_floating(a.dtype):
        raise DTypeError("linalg.matrix_exp: Expected a floating point or complex tensor as input. "
                         f"Got {dispatch.scalar_type_name(a.dtype)}")
    if a.numel() == 0:
        return add(a, 0)
    host = dispatch.to_device(dispatch.cast(a._data, np.float64), "cpu")
    norm = float(np.abs(host).sum(axis=-2).max())
    squarings = max(0, int(np.ceil(np.log2(norm / 0.5)))) if norm > 0.5 else 0
    x = mul(a, 0.5 ** squarings)
    identity = expand(_like(np.eye(a.shape[-1]), a), a.shape)
    result = identity
    for k in range(_EXP_TERMS, 0, -1):
        result = add(identity, mul(matmul(x, result), 1.0 / k))
    for _ in range(squarings):
        result = matmul(result, result)
    return result


def vander(x: Any, N: int | None = None) -> Any:  # noqa: N803 - PyTorch's names
    """The Vandermonde matrix of each vector of ``x`` (..., n): (..., n, N) with columns x**0, x**1,
    ..., x**(N-1) (N defaults to n), formed by running products as PyTorch's, so the powers are
    its values bit for bit.

    Raises:
        RuntimeError: ``x`` 0-dimensional, or N < 2 (PyTorch's message).
    """
    x = tensor_arg(x, "linalg.vander", "x")
    columns = (x.shape[-1] if x.ndim else 0) if N is None else N
    if x.ndim == 0 or columns <= 1:
        raise RuntimeError("N must be greater than 1.")
    ones = ones_like(unsqueeze(x, -1))
    return cumprod(cat([ones, expand(unsqueeze(x, -1), (*x.shape, columns - 1))], -1), -1)


def diagonal(A: Any, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:  # noqa: N803
    """The diagonals of the matrices of ``A`` (a view): ``zgrad.diagonal`` with the last two
    dimensions as the default matrix dimensions."""
    return ops_diagonal(A, offset, dim1, dim2)
